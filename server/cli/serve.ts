import { pino } from 'pino'
import { SluiceError } from '../../shared/index.js'
import { createCoordinator } from '../create.js'
import { parseFlags, portOption } from './flags.js'
import { exitCodes, type CommandIo } from './io.js'

/** Where `sluice serve` keeps its ledger unless told otherwise (relative to the working directory). */
export const defaultDataDir = 'sluice-data'

/** The flags `sluice serve` takes. */
export const serveFlags = [
  'config',
  'host',
  'port',
  'data-dir',
  'etcd',
  'advertise',
  'parent',
] as const

/**
 * `sluice serve --config FILE [--host H] [--port P] [--etcd URL[,URL]] [--advertise WS_URL]
 * [--parent WS_URL[,WS_URL]] [--data-dir DIR|none]`: runs until SIGINT or SIGTERM; SIGHUP reloads.
 */
export async function serveCommand(args: readonly string[], io: CommandIo): Promise<number> {
  const { values } = parseFlags('serve', args, serveFlags, { min: 0, max: 0 })
  if (values.config === undefined) {
    throw new SluiceError(
      'SLUICE_ERR_CLI_USAGE',
      'serve needs --config FILE (see examples/default.yaml)',
    )
  }
  const logger = pino({ level: process.env.SLUICE_LOG_LEVEL ?? 'info' })
  const server = await createCoordinator({
    config: values.config,
    host: values.host,
    port: portOption(values.port),
    etcd: values.etcd?.split(',').filter((u) => u !== ''),
    advertise: values.advertise,
    parent: values.parent?.split(',').filter((u) => u !== ''),
    // The embedded ledger is on by default: a restart resumes at once instead of learning.
    dataDir: values['data-dir'] === 'none' ? false : values['data-dir'],
    defaultDataDir,
    logger,
  })
  io.stdout.write(
    `sluice coordinator listening on ${server.url} (clients connect to ${server.wsUrl})\n`,
  )
  server.events.on('config-applied', (summary: { resources: number; tenants: number }) =>
    io.stdout.write(
      `config reloaded: ${summary.resources} resource template(s), ${summary.tenants} tenant(s)\n`,
    ),
  )
  server.events.on('role', (role: string, detail: string) =>
    io.stdout.write(
      role === 'leader' ? `elected leader as ${detail}\n` : `following (stepped down: ${detail})\n`,
    ),
  )
  server.events.on('config-rejected', (error) =>
    io.stderr.write(
      `config reload refused, old config stays: ${error instanceof Error ? error.message : String(error)}\n`,
    ),
  )

  const signals = io.signals ?? process
  return new Promise<number>((resolve) => {
    const onHup = (): void => void server.reload().catch(() => undefined)
    const onStop = (): void => {
      signals.off('SIGHUP', onHup)
      signals.off('SIGINT', onStop)
      signals.off('SIGTERM', onStop)
      server.close().then(
        () => resolve(exitCodes.ok),
        () => resolve(exitCodes.failure),
      )
    }
    signals.on('SIGHUP', onHup)
    signals.on('SIGINT', onStop)
    signals.on('SIGTERM', onStop)
  })
}
