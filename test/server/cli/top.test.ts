import { execFile, execFileSync } from 'node:child_process'
import { mkdtempSync, readFileSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { promisify } from 'node:util'
import { afterEach, describe, expect, it } from 'vitest'
import {
  applyAction,
  parseKeys,
  renderTop,
  sparkline,
  type TopData,
  type TopUi,
} from '../../../server/cli/top/index.js'
import { formatStatusTable } from '../../../server/cli/status.js'
import { Cluster, Load } from '../../helpers/cluster.js'
import { apiAndDbConfig } from '../../helpers/coordinator.js'
import { assertBuilt, cli } from '../../helpers/replica.js'
import { waitFor } from '../../helpers/wait.js'

const run = promisify(execFile)

describe('sluice top, its parts', () => {
  it('draws a sparkline: one character per value, 0 blank, scaled to max, newest on the right', () => {
    expect(sparkline([0, 1, 2, 4, 8], 8, 5)).toBe(' ▁▂▄█')
    expect(sparkline([8, 8], 8, 4)).toBe('  ██')
    expect(sparkline([1, 2, 3, 4, 5, 6], 6, 3)).toBe('▆▇█')
    expect(sparkline([0.001, 100], 8, 2)).toBe('▁█')
    expect(sparkline([3], 0, 1)).toBe(' ')
  })

  it('reads keys from raw terminal input, several per chunk', () => {
    expect(parseKeys('\x1b[B\x1b[Bj\r')).toEqual(['down', 'down', 'down', 'open'])
    expect(parseKeys('\x1b')).toEqual(['back'])
    expect(parseKeys('ksq\x03x')).toEqual(['up', 'sort', 'quit', 'quit'])
    const ui: TopUi = { view: 'resources', selected: 0, sort: 'refused' }
    applyAction(ui, 'up', 3)
    expect(ui.selected).toBe(0)
    for (let i = 0; i < 5; i++) applyAction(ui, 'down', 3)
    expect(ui.selected).toBe(2)
    applyAction(ui, 'open', 3)
    applyAction(ui, 'sort', 3)
    expect(ui).toEqual({ view: 'clients', selected: 2, sort: 'admitted' })
    applyAction(ui, 'back', 3)
    expect(ui.view).toBe('resources')
  })

  it('fits every line to the screen, dropping the least useful columns first', () => {
    const resource = {
      id: 'payments-api',
      kind: 'rate' as const,
      capacity: 1000,
      committed: 1000,
      free: 0,
      demand: 1500,
      clients: 3,
      learning: false,
      rounds: 9,
      admittedPerSec: 998,
      refusedPerSec: 480.5,
      utilisation: 0.998,
      waiting: 0,
      inFlight: 0,
      refusing: 1,
    }
    const data: TopData = {
      url: 'http://127.0.0.1:7070',
      role: 'leader',
      leader: null,
      learning: [],
      resources: [resource],
      history: new Map([
        [
          'payments-api',
          {
            t: [1, 2, 3],
            capacity: [1000, 1000, 1000],
            admitted: [500, 1000, 998],
            refused: [0, 100, 480],
            inFlight: [0, 0, 0],
          },
        ],
      ]),
      detail: undefined,
      error: undefined,
      updatedAtMs: Date.UTC(2026, 0, 1, 12, 0, 0),
    }
    const ui: TopUi = { view: 'resources', selected: 0, sort: 'refused' }
    for (const columns of [160, 100, 60, 40]) {
      const lines = renderTop(data, ui, { columns, rows: 12, color: false })
      expect(lines).toHaveLength(12)
      for (const line of lines) expect(line.length).toBeLessThanOrEqual(columns)
      const row = lines.find((l) => l.startsWith('payments-api'))!
      // What must always be there: the name, how much is used and what is refused.
      expect(row).toMatch(/100%\s+481 \(32%\)/)
    }
    const wide = renderTop(data, ui, { columns: 160, rows: 12, color: false })
    expect(wide[0]).toContain('leader · 12:00:00 UTC')
    expect(wide.find((l) => l.startsWith('payments-api'))).toMatch(/1,000\/s.*1!3 .*▄██ +▂█ *$/)
    // In colour, the selected row is in inverse video.
    const coloured = renderTop(data, ui, { columns: 160, rows: 12, color: true })
    expect(coloured.find((l) => l.includes('payments-api'))?.startsWith('\x1b[7m')).toBe(true)
  })

  it('shows a keyed family as a limit per key: its keys kind, a key limit and window, its hot keys, and no one use figure', () => {
    const family = (kind: 'rate' | 'quota', id: string, extra: object) => ({
      id,
      kind,
      capacity: 100,
      committed: 75,
      free: 25,
      demand: 3,
      clients: 3,
      learning: false,
      rounds: 9,
      admittedPerSec: 960,
      refusedPerSec: 510,
      utilisation: 0,
      waiting: 0,
      inFlight: 0,
      refusing: 2,
      family: { prefix: id.slice(0, -2), hotKeys: 12, maxHotKeys: 1000, ...extra },
    })
    const data: TopData = {
      url: 'http://127.0.0.1:7070',
      role: 'leader',
      leader: null,
      learning: [],
      resources: [
        family('quota', 'customer/*', { windowUnit: 'day' }),
        family('quota', 'user/*', { windowMs: 60_000 }),
        family('rate', 'apikey/*', {}),
      ],
      history: new Map(),
      detail: undefined,
      error: undefined,
      updatedAtMs: Date.UTC(2026, 0, 1, 12, 0, 0),
    }
    const lines = renderTop(
      data,
      { view: 'resources', selected: 0, sort: 'refused' },
      {
        columns: 160,
        rows: 12,
        color: false,
      },
    )
    const row = (id: string) => lines.find((l) => l.startsWith(id))!
    expect(row('apikey/*')).toMatch(/rate\s+12 hot\s+—\s+510 \(35%\)\s+960\s+100\/s\/key\s/)
    expect(row('user/*')).toMatch(/quota\s+12 hot\s+—\s+.*100\/key\/1m\s/)
    expect(row('customer/*')).toMatch(/100\/key\/day\s/)
    expect(formatStatusTable(data.resources)).toMatch(/customer\/\*\s+quota\s+100\/key\/day\s/)
  })
})

// The real thing: the built `sluice top` in a real pseudo-terminal (tmux), against a real
// coordinator whose clients' load changes. The coordinator runs on a manual clock; top on real time.

const config = apiAndDbConfig()

const open: Array<() => unknown> = []
afterEach(async () => {
  for (const close of open.splice(0).reverse()) await close()
})

describe('sluice top in a terminal', () => {
  it('shows resources with sparklines, opens a resource on Enter to show who is refused, and quits on q', async () => {
    assertBuilt()
    const cluster = new Cluster()
    await cluster.start(config)
    open.push(() => cluster.close())
    const alpha = await cluster.client('alpha', { name: 'checkout-1' })
    const beta = await cluster.client('beta', { name: 'search-7' })
    const loads = [
      new Load(alpha.resource('api', { wants: 100 }), 100),
      new Load(beta.resource('api', { wants: 500 }), 500),
    ]
    const step = async (seconds: number) => {
      for (let i = 0; i < seconds * 10; i++) {
        for (const l of loads) l.tick(100)
        await cluster.step(100)
      }
    }
    await step(6)

    const dir = mkdtempSync(join(tmpdir(), 'sluice-top-'))
    const socket = `sluice-top-${process.pid}`
    const tmux = (...args: string[]) =>
      execFileSync('tmux', ['-L', socket, ...args], { encoding: 'utf8' })
    open.push(() => {
      try {
        tmux('kill-server')
      } catch {
        // already gone
      }
      rmSync(dir, { recursive: true, force: true })
    })
    const exitFile = join(dir, 'exit')
    tmux(
      'new-session',
      '-d',
      '-x',
      '120',
      '-y',
      '24',
      `node ${cli} top --url ${cluster.server.url} --interval-ms 200; echo $? > ${exitFile}; sleep 30`,
    )
    const screen = () => tmux('capture-pane', '-p')
    const until = (what: string, test: (s: string) => boolean) =>
      waitFor(what, () => {
        const s = screen()
        return test(s) ? s : undefined
      }).catch((error: Error) => {
        throw new Error(`${error.message}; the screen was:\n${screen()}`)
      })

    const first = await until('the resource list', (s) => /^api\s/m.test(s) && /^db\s/m.test(s))
    expect(first.split('\n')[0]).toMatch(/^sluice top · http:\/\/127\.0\.0\.1:\d+ · leader · /)
    expect(first).toMatch(/RESOURCE\s+KIND\s+STATE\s+USED\s+REFUSED\/s/)
    const api = first.split('\n').find((l) => l.startsWith('api'))!
    // 600/s asked of 300: about half refused, one of two clients refusing, history drawn.
    expect(api).toMatch(/rate\s+leasing\s+\d+%\s+[\d.,]+ \(\d+%\)/)
    expect(api).toMatch(/300\/s/)
    expect(api).toMatch(/1!2/)
    expect(api).toMatch(/[▁▂▃▄▅▆▇█]/)
    expect(first).toContain('↑↓ select · enter clients · q quit')

    // Enter on the first resource (api): its clients, the one refused first.
    tmux('send-keys', 'Enter')
    const clients = await until('the clients of api', (s) => /search-7 \(beta\)/.test(s))
    const rows = clients.split('\n')
    expect(rows[1]).toMatch(/^api · rate · leasing · used \d+% · refused/)
    const order = rows.filter((l) => /checkout-1|search-7/.test(l))
    expect(order[0]).toMatch(/^search-7 \(beta\)/)
    expect(order[0]).toMatch(/for \d/)
    expect(order[1]).toMatch(/^checkout-1 \(alpha\)/)

    // s sorts by what is admitted; Esc goes back; ↓ Enter opens db.
    tmux('send-keys', 's')
    await until('the order by admitted', (s) => s.includes('s sort (by admitted)'))
    tmux('send-keys', 'Escape')
    await until('the resource list again', (s) => /^RESOURCE/m.test(s))
    tmux('send-keys', 'Down', 'Enter')
    await until('db opened', (s) => /^db · concurrency/m.test(s))

    tmux('send-keys', 'q')
    const code = await waitFor('top to exit', () => {
      try {
        return readFileSync(exitFile, 'utf8').trim()
      } catch {
        return undefined
      }
    })
    expect(code).toBe('0')
  })

  it('prints one plain frame with --once, and says a token is needed when reads need one', async () => {
    assertBuilt()
    const cluster = new Cluster()
    await cluster.start({ ...config, server: { ...config.server, readToken: 'read-token-123' } })
    open.push(() => cluster.close())
    const a = await cluster.client('alpha')
    a.resource('api', { wants: 50 })
    await cluster.step(100)
    const out = await run('node', [
      cli,
      'top',
      '--once',
      '--url',
      cluster.server.url,
      '--token',
      'read-token-123',
    ])
    expect(out.stdout).toMatch(/^sluice top · /)
    expect(out.stdout).toMatch(/^api\s+rate\s+leasing/m)
    expect(out.stdout).not.toContain('\x1b[')
    const refused = await run('node', [cli, 'top', '--once', '--url', cluster.server.url]).catch(
      (e: { code: number; stderr: string }) => e,
    )
    expect(refused).toMatchObject({ code: 1 })
    expect((refused as { stderr: string }).stderr).toContain('SLUICE_ERR_HTTP_UNAUTHORIZED')
  })
})
