import { EventEmitter } from 'node:events'
import { hostname } from 'node:os'
import type { Server as TlsServer } from 'node:tls'
import type { FastifyInstance } from 'fastify'
import { pino, type Logger } from 'pino'
import { SluiceError, connectPath, systemClock, type Clock } from '../shared/index.js'
import {
  loadTls,
  parseConfig,
  resolveConfig,
  type Config,
  type ConfigInput,
} from './config/index.js'
import { Coordinator } from './coordinator/index.js'
import type { LeaderElection } from './ha/index.js'
import type { SluiceClient } from '../client/index.js'
import { Upstream } from './tree/index.js'
import { buildHttpApp } from './http/index.js'
import type { Ledger } from './ledger/index.js'
import { Gateway } from './transport/index.js'
import {
  holdingsKeys,
  makeElection,
  openFileLedger,
  reloadPolicy,
  startElection,
  watchConfigFile,
  type CoordinatorEventEmitter,
} from './wiring/index.js'

export interface CoordinatorOptions {
  /** A config object, or the path of a YAML or JSON file. */
  config: ConfigInput | Config | string
  /** Overrides `server.host`. */
  host?: string | undefined
  /** Overrides `server.port`; 0 picks a free port. */
  port?: number | undefined
  /** Default: the system clock. */
  clock?: Clock | undefined
  /**
   * What times the event loop's turns, which the connections' frames share (transport/turns.ts):
   * the system clock, even where `clock` is a manual one. Tests may make frames look slow.
   */
  loopClock?: Clock | undefined
  /** Default: pino at level info on stdout. */
  logger?: Logger | undefined
  /** Watch the config file and reload on change; default true when `config` is a path. */
  watchConfig?: boolean | undefined
  /** Overrides `server.ha.etcd`: replicas elect a leader through these etcd endpoints. */
  etcd?: readonly string[] | undefined
  /** Overrides `server.ha.advertise`. */
  advertise?: string | undefined
  /**
   * Overrides `server.dataDir`: the directory of the embedded ledger; `false` for none. A
   * coordinator elected among replicas keeps its ledger in etcd instead.
   */
  dataDir?: string | false | undefined
  /** The ledger's directory when neither `dataDir` nor `server.dataDir` names one; default none. */
  defaultDataDir?: string | undefined
  /** Overrides `server.parent.url`: lease capacity from this parent coordinator. */
  parent?: readonly string[] | undefined
  /**
   * Any other election (embedding, tests), made once the port is known. Without it and without
   * `server.ha`, this coordinator leads alone.
   */
  election?: ((advertiseUrl: string) => LeaderElection) | undefined
}

export interface RunningCoordinator {
  /** `http://host:port` */
  readonly url: string
  /** `ws://host:port/v1/connect` */
  readonly wsUrl: string
  readonly port: number
  /** The coordinator's logic, for embedding and tests. */
  readonly coordinator: Coordinator
  /** What it tells its embedder: config applied or rejected, file changed, role changed. */
  readonly events: CoordinatorEventEmitter
  /** The fastify instance serving the HTTP API (`inject` for tests, hooks for embedding). */
  readonly http: FastifyInstance
  /** The URL advertised to the election (clients are redirected there while this replica leads). */
  readonly advertiseUrl: string
  /** A downstream coordinator's client of its parent (`server.parent`). */
  readonly parentClient: SluiceClient | undefined
  /** Reloads from the config file, or applies `config` when given. An invalid config is refused; the old one stays. */
  reload(config?: unknown): Promise<{ resources: number; tenants: number }>
  close(): Promise<void>
}

/**
 * The config with the command line's overrides folded in (`--etcd`,
 * `--parent`), validated again as a whole, so an override obeys the same
 * rules and defaults as the file.
 */
function withOverrides(config: Config, options: CoordinatorOptions): Config {
  if (options.etcd === undefined && options.parent === undefined) return config
  const server: Record<string, unknown> = { ...config.server }
  if (options.etcd !== undefined) server.ha = { ...config.server.ha, etcd: [...options.etcd] }
  if (options.parent !== undefined)
    server.parent = { ...config.server.parent, url: [...options.parent] }
  return parseConfig({ ...config, server }, 'command line')
}

/** Whether `host` is a loopback interface (tokens sent to it never cross a network). */
function isLoopback(host: string): boolean {
  return host === 'localhost' || host === '::1' || host.startsWith('127.')
}

/** Listens, or fails with a message that says what to do. */
async function listen(app: FastifyInstance, host: string, port: number): Promise<number> {
  try {
    await app.listen({ host, port })
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code
    throw new SluiceError(
      'SLUICE_ERR_SERVER_LISTEN',
      code === 'EADDRINUSE'
        ? `${host}:${port} is in use (another coordinator?): stop it, or pick another port with --port`
        : code === 'EACCES'
          ? `${host}:${port}: permission denied (ports below 1024 need privileges)`
          : `${host}:${port}: ${(error as Error).message}`,
      { cause: error },
    )
  }
  const address = app.server.address()
  return typeof address === 'object' && address !== null ? address.port : 0
}

/** A downstream coordinator's link to its parent (`server.parent`), attached. */
function linkParent(
  config: Config,
  coordinator: Coordinator,
  port: number,
  clock: Clock,
  logger: Logger,
): Upstream | undefined {
  const parent = config.server.parent
  if (parent === undefined) return undefined
  const upstream = new Upstream(
    {
      urls: typeof parent.url === 'string' ? [parent.url] : parent.url,
      token: parent.token,
      clientId: parent.clientId ?? `coordinator:${hostname()}:${port}`,
      clock,
      logger,
    },
    {
      changed: (id) => coordinator.upstreamChanged(id),
      committed: (id) => coordinator.committed(id),
    },
  )
  coordinator.attachUpstream(upstream)
  return upstream
}

/** Starts a coordinator: HTTP API and WebSocket endpoint on one port. */
export async function createCoordinator(options: CoordinatorOptions): Promise<RunningCoordinator> {
  const clock = options.clock ?? systemClock
  const logger = options.logger ?? pino({ level: 'info' })
  const configPath = typeof options.config === 'string' ? options.config : undefined
  const config = withOverrides(await resolveConfig(options.config), options)
  const ha = config.server.ha
  const elected = ha !== undefined || options.election !== undefined
  const coordinator = new Coordinator(config, clock, logger, elected ? 'follower' : 'leader')
  coordinator.setHoldingsKeys(holdingsKeys(config, process.env))
  const dataDir = options.dataDir ?? config.server.dataDir ?? options.defaultDataDir
  const ledger: Ledger | undefined =
    dataDir !== undefined && dataDir !== false && !elected
      ? await openFileLedger(dataDir, coordinator, logger)
      : undefined
  const events: CoordinatorEventEmitter = new EventEmitter()

  let ready = false
  const tls = config.server.tls === undefined ? undefined : await loadTls(config.server.tls)
  const reload = reloadPolicy({
    coordinator,
    logger,
    events,
    configPath,
    tlsServer: () => (tls === undefined ? undefined : (app.server as unknown as TlsServer)),
  })
  const app = buildHttpApp({
    tls,
    coordinator,
    clock,
    logger,
    reload,
    ready: () => ready && !coordinator.closed,
  })
  const gateway = new Gateway(app.server, coordinator, clock, logger, options.loopClock)
  const host = options.host ?? config.server.host
  const port = await listen(app, host, options.port ?? config.server.port).catch(async (e) => {
    await ledger?.close().catch(() => undefined)
    throw e
  })
  const urlHost = host.includes(':') ? `[${host}]` : host
  const scheme = tls === undefined ? { http: 'http', ws: 'ws' } : { http: 'https', ws: 'wss' }
  const advertise = options.advertise ?? ha?.advertise
  const advertiseUrl = advertise ?? `${scheme.ws}://${urlHost}:${port}${connectPath}`
  if (tls !== undefined && advertiseUrl.startsWith('ws://')) {
    await app.close()
    throw new SluiceError(
      'SLUICE_ERR_CONFIG_INVALID',
      `--advertise ${advertiseUrl}: must be a wss:// URL when server.tls is set (followers send clients there)`,
    )
  }
  if (elected && advertise === undefined && (host === '0.0.0.0' || host === '::')) {
    await app.close()
    throw new SluiceError(
      'SLUICE_ERR_CONFIG_INVALID',
      `server.ha.advertise: needed when listening on ${host}; followers redirect clients there`,
    )
  }
  if (Object.keys(config.tenants).length > 0 && tls === undefined && !isLoopback(host))
    logger.warn(
      { host },
      'tenants authenticate with bearer tokens over plain ws:// on a non-loopback interface: anyone on the path can read them; set server.tls',
    )
  const upstream = linkParent(config, coordinator, port, clock, logger)
  const ctx = { coordinator, clock, logger, events, advertiseUrl }
  const { election, ledger: haLedger } = await makeElection(
    ctx,
    ha,
    options.election,
    dataDir !== false,
  )
  if (election !== undefined) startElection(ctx, election, haLedger)
  ready = true
  logger.info(
    { url: `${scheme.http}://${urlHost}:${port}`, resources: config.resources.length },
    'coordinator listening',
  )
  const watcher =
    configPath !== undefined && options.watchConfig !== false
      ? await watchConfigFile(configPath, clock, logger, events, reload)
      : undefined

  return {
    url: `${scheme.http}://${urlHost}:${port}`,
    wsUrl: `${scheme.ws}://${urlHost}:${port}${connectPath}`,
    port,
    coordinator,
    events,
    http: app,
    advertiseUrl,
    parentClient: upstream?.client,
    reload,
    async close() {
      ready = false
      watcher?.close()
      // Resign first, so a successor takes over without waiting out the etcd lease.
      await election?.close()
      await upstream?.close()
      coordinator.close()
      await coordinator.ledgerIdle()
      await ledger?.close()
      await haLedger?.close()
      gateway.close()
      await app.close()
      logger.info('coordinator closed')
    },
  }
}
