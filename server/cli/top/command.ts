import { systemClock } from '../../../shared/index.js'
import { coordinatorUrl, parseFlags } from '../flags.js'
import { exitCodes, type CommandIo } from '../io.js'
import { TopFeed } from './feed.js'
import { parseKeys, type TopAction } from './keys.js'
import { clientSorts, renderTop, type TopUi } from './render.js'

const minIntervalMs = 200

/** Moves the selection, opens or leaves a resource, changes the client order. */
export function applyAction(ui: TopUi, action: TopAction, resources: number): void {
  switch (action) {
    case 'up':
      if (ui.view === 'resources') ui.selected = Math.max(0, ui.selected - 1)
      break
    case 'down':
      if (ui.view === 'resources')
        ui.selected = Math.max(0, Math.min(resources - 1, ui.selected + 1))
      break
    case 'open':
      if (resources > 0) ui.view = 'clients'
      break
    case 'back':
      ui.view = 'resources'
      break
    case 'sort':
      ui.sort = clientSorts[(clientSorts.indexOf(ui.sort) + 1) % clientSorts.length]!
      break
    case 'quit':
      break
  }
}

/** The flags `sluice top` takes. */
export const topFlags = ['url', 'token', 'interval-ms', 'once'] as const

/**
 * `sluice top`: the dashboard's live view in a terminal. Every interval it
 * reads the status API (the same one the dashboard reads) and redraws:
 * resources with sparklines of use and refusals; Enter opens a resource's
 * clients. Without a terminal (or with --once) it prints one plain frame.
 */
export async function topCommand(args: readonly string[], io: CommandIo): Promise<number> {
  const { values } = parseFlags('top', args, topFlags, { min: 0, max: 0 })
  const base = coordinatorUrl(values.url, process.env)
  const token = values.token ?? process.env.SLUICE_TOKEN
  const intervalMs = Math.max(minIntervalMs, Number(values['interval-ms'] ?? 1000) || 1000)
  const feed = new TopFeed(base, token)
  const ui: TopUi = { view: 'resources', selected: 0, sort: 'refused' }
  const tty = io.tty
  if (values.once === true || tty === undefined) {
    await feed.refresh(undefined, systemClock.wallNow())
    const rows = feed.data.resources.length + 6
    const lines = renderTop(feed.data, ui, { columns: 160, rows, color: false })
    io.stdout.write(
      lines
        .map((l) => l.trimEnd())
        .join('\n')
        .trimEnd() + '\n',
    )
    return feed.data.error === undefined ? exitCodes.ok : exitCodes.failure
  }

  const { input, output } = tty
  let selectedId: string | undefined
  let busy = false
  let fatal: Error | undefined
  const draw = (): void => {
    const screen = {
      // One column spare: a line as wide as the terminal would wrap on some terminals.
      columns: Math.max(20, (output.columns || 80) - 1),
      rows: Math.max(5, output.rows || 24),
      color: true,
    }
    output.write('\x1b[H' + renderTop(feed.data, ui, screen).join('\r\n') + '\x1b[J')
  }
  const follow = (): void => {
    // Keep the same resource selected when the list changes.
    const i = feed.data.resources.findIndex((r) => r.id === selectedId)
    ui.selected = i >= 0 ? i : Math.max(0, Math.min(ui.selected, feed.data.resources.length - 1))
    selectedId = feed.data.resources[ui.selected]?.id
  }
  return await new Promise<number>((resolve, reject) => {
    const tick = async (): Promise<void> => {
      if (busy) return
      busy = true
      try {
        await feed.refresh(ui.view === 'clients' ? selectedId : undefined, systemClock.wallNow())
        follow()
        draw()
      } catch (error) {
        fatal = error as Error
        stop()
      } finally {
        busy = false
      }
    }
    const onData = (chunk: Buffer | string): void => {
      for (const action of parseKeys(chunk.toString())) {
        if (action === 'quit') return stop()
        const view = ui.view
        applyAction(ui, action, feed.data.resources.length)
        selectedId = feed.data.resources[ui.selected]?.id
        if (ui.view !== view) void tick()
      }
      draw()
    }
    const onResize = (): void => draw()
    const timer = systemClock.setInterval(() => void tick(), intervalMs)
    function stop(): void {
      timer.cancel()
      input.off('data', onData)
      output.off('resize', onResize)
      input.setRawMode(false)
      input.pause()
      // Leave the alternate screen and show the cursor again.
      output.write('\x1b[?25h\x1b[?1049l')
      if (fatal !== undefined) reject(fatal)
      else resolve(exitCodes.ok)
    }
    output.write('\x1b[?1049h\x1b[?25l')
    input.setRawMode(true)
    input.resume()
    input.on('data', onData)
    output.on('resize', onResize)
    draw()
    void tick()
  })
}
