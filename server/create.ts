import { EventEmitter } from 'node:events'
import { watch, type FSWatcher } from 'node:fs'
import type { FastifyInstance } from 'fastify'
import { pino, type Logger } from 'pino'
import { SluiceError, connectPath, systemClock, type Clock, type Timer } from '../shared/index.js'
import {
  loadConfigFile,
  parseConfig,
  resolveConfig,
  type Config,
  type ConfigInput,
} from './config/index.js'
import { Coordinator } from './coordinator/index.js'
import { buildHttpApp } from './http/app.js'
import { Gateway } from './transport/index.js'

export interface CoordinatorOptions {
  /** A config object, or the path of a YAML or JSON file. */
  config: ConfigInput | Config | string
  /** Overrides `server.host`. */
  host?: string | undefined
  /** Overrides `server.port`; 0 picks a free port. */
  port?: number | undefined
  /** Default: the system clock. */
  clock?: Clock | undefined
  /** Default: pino at level info on stdout. */
  logger?: Logger | undefined
  /** Watch the config file and reload on change; default true when `config` is a path. */
  watchConfig?: boolean | undefined
}

export interface RunningCoordinator {
  /** `http://host:port` */
  readonly url: string
  /** `ws://host:port/v1/connect` */
  readonly wsUrl: string
  readonly port: number
  /** The coordinator's logic, for embedding and tests. */
  readonly coordinator: Coordinator
  /**
   * 'config-applied' (summary), 'config-rejected' (error), and
   * 'config-file-changed' when the watcher sees the file change (it reloads 200 ms later, on the clock).
   */
  readonly events: EventEmitter
  /** The fastify instance serving the HTTP API (`inject` for tests, hooks for embedding). */
  readonly http: FastifyInstance
  /** Reloads from the config file, or applies `config` when given. An invalid config is refused; the old one stays. */
  reload(config?: unknown): Promise<{ resources: number; tenants: number }>
  close(): Promise<void>
}

/** Starts a coordinator: HTTP API and WebSocket endpoint on one port. */
export async function createCoordinator(options: CoordinatorOptions): Promise<RunningCoordinator> {
  const clock = options.clock ?? systemClock
  const logger = options.logger ?? pino({ level: 'info' })
  const configPath = typeof options.config === 'string' ? options.config : undefined
  const config = await resolveConfig(options.config)
  const coordinator = new Coordinator(config, clock, logger)
  let ready = false
  const events = new EventEmitter()

  const reload = async (body?: unknown): Promise<{ resources: number; tenants: number }> => {
    try {
      let next: Config
      if (body !== undefined && body !== null && body !== '')
        next = parseConfig(body, 'request body')
      else if (configPath !== undefined) next = await loadConfigFile(configPath)
      else
        throw new SluiceError(
          'SLUICE_ERR_CONFIG_INVALID',
          'no config file to reload from; send the config in the body',
        )
      coordinator.applyConfig(next)
      const summary = {
        resources: next.resources.length,
        tenants: Object.keys(next.tenants).length,
      }
      events.emit('config-applied', summary)
      return summary
    } catch (error) {
      coordinator.metrics.reloads.inc({ outcome: 'rejected' })
      logger.error({ err: error }, 'config reload refused; the old config stays')
      events.emit('config-rejected', error)
      throw error
    }
  }

  const app = buildHttpApp({
    coordinator,
    clock,
    logger,
    reload,
    ready: () => ready && !coordinator.closed,
  })
  const gateway = new Gateway(app.server, coordinator, clock, logger)
  const host = options.host ?? config.server.host
  await app.listen({ host, port: options.port ?? config.server.port })
  const address = app.server.address()
  const port = typeof address === 'object' && address !== null ? address.port : 0
  const urlHost = host.includes(':') ? `[${host}]` : host
  ready = true
  logger.info(
    { url: `http://${urlHost}:${port}`, resources: config.resources.length },
    'coordinator listening',
  )

  let watcher: FSWatcher | undefined
  let debounce: Timer | undefined
  if (configPath !== undefined && options.watchConfig !== false) {
    watcher = watch(configPath, () => {
      // Editors write in several steps: reload once things settle.
      events.emit('config-file-changed')
      debounce?.cancel()
      debounce = clock.setTimeout(() => {
        debounce = undefined
        reload().catch(() => undefined)
      }, 200)
    })
    watcher.on('error', (error) =>
      logger.warn({ err: error }, 'config watch failed; reload by SIGHUP or the admin API'),
    )
  }

  return {
    url: `http://${urlHost}:${port}`,
    wsUrl: `ws://${urlHost}:${port}${connectPath}`,
    port,
    coordinator,
    events,
    http: app,
    reload,
    async close() {
      ready = false
      watcher?.close()
      debounce?.cancel()
      coordinator.close()
      gateway.close()
      await app.close()
      logger.info('coordinator closed')
    },
  }
}
