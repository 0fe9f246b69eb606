import { EventEmitter } from 'node:events'
import { readFile } from 'node:fs/promises'
import { hostname } from 'node:os'
import type { Server as TlsServer } from 'node:tls'
import type { FastifyInstance } from 'fastify'
import { pino, type Logger } from 'pino'
import {
  SluiceError,
  connectPath,
  describeIssues,
  systemClock,
  type Clock,
} from '../shared/index.js'
import {
  ConfigFileWatcher,
  loadConfigFile,
  parseConfig,
  holdingsKeySchema,
  loadTls,
  parseConfigText,
  resolveConfig,
  securityDowngrades,
  type HoldingsKeyConfig,
  type Config,
  type ConfigInput,
} from './config/index.js'
import { Coordinator } from './coordinator/index.js'
import { EtcdElection, type LeaderElection } from './ha/index.js'
import type { SluiceClient } from '../client/index.js'
import { Upstream } from './tree/index.js'
import { buildHttpApp } from './http/index.js'
import { FileLedger, type Ledger, type LedgerEntry } from './ledger/index.js'
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
  /** Overrides `server.ha.etcd`: replicas elect a leader through these etcd endpoints. */
  etcd?: readonly string[] | undefined
  /** Overrides `server.ha.advertise`. */
  advertise?: string | undefined
  /**
   * Overrides `server.dataDir`: the directory of the embedded ledger; `false` for none. A
   * coordinator elected among replicas keeps its ledger in etcd instead.
   */
  dataDir?: string | false | undefined
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
  /**
   * 'config-applied' (summary), 'config-rejected' (error), and
   * 'config-file-changed' when the watcher sees the file change (it reloads 200 ms later, on the clock),
   * 'role' ('leader' | 'follower', detail) when an election changes this replica's role.
   */
  readonly events: EventEmitter
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

/**
 * The holdings key: the config's, else SLUICE_HOLDINGS_KEY (and
 * SLUICE_HOLDINGS_KEY_PREVIOUS, comma-separated), validated like the config.
 */
function holdingsKeys(config: Config, env: NodeJS.ProcessEnv): HoldingsKeyConfig | undefined {
  if (config.server.holdingsKey !== undefined) return config.server.holdingsKey
  const current = env.SLUICE_HOLDINGS_KEY
  if (current === undefined || current === '') return undefined
  const previous = (env.SLUICE_HOLDINGS_KEY_PREVIOUS ?? '').split(',').filter((k) => k !== '')
  const parsed = holdingsKeySchema.safeParse({ current, previous })
  if (!parsed.success)
    throw new SluiceError(
      'SLUICE_ERR_CONFIG_INVALID',
      `SLUICE_HOLDINGS_KEY / SLUICE_HOLDINGS_KEY_PREVIOUS: ${describeIssues(parsed.error)}`,
    )
  return parsed.data
}

/** Starts a coordinator: HTTP API and WebSocket endpoint on one port. */
export async function createCoordinator(options: CoordinatorOptions): Promise<RunningCoordinator> {
  const clock = options.clock ?? systemClock
  const logger = options.logger ?? pino({ level: 'info' })
  const configPath = typeof options.config === 'string' ? options.config : undefined
  const config = withOverrides(await resolveConfig(options.config), options)
  const ha = config.server.ha
  const advertise = options.advertise ?? ha?.advertise
  const elected = ha !== undefined || options.election !== undefined
  const coordinator = new Coordinator(config, clock, logger, elected ? 'follower' : 'leader')
  coordinator.setHoldingsKeys(holdingsKeys(config, process.env))
  const dataDir = options.dataDir ?? config.server.dataDir
  let ledger: Ledger | undefined
  if (dataDir !== undefined && dataDir !== false && !elected) {
    ledger = new FileLedger(dataDir)
    let restored: LedgerEntry[] | undefined
    try {
      restored = await ledger.load()
    } catch (error) {
      // Another running coordinator writes here: refuse to start rather than share its ledger.
      // A data directory that cannot be used is a start that fails, not a silent run without a ledger.
      if (
        error instanceof SluiceError &&
        (error.code === 'SLUICE_ERR_LEDGER_LOCKED' || error.code === 'SLUICE_ERR_LEDGER_DIR')
      )
        throw error
      // Never trust what cannot be read: learn instead, and say why.
      logger.error({ err: error }, 'the ledger cannot be trusted; learning instead')
      coordinator.metrics.errors.inc({ code: 'SLUICE_ERR_LEDGER_CORRUPT' })
    }
    coordinator.attachLedger(ledger, restored)
  }
  let ready = false
  const events = new EventEmitter()

  const reload = async (body?: unknown): Promise<{ resources: number; tenants: number }> => {
    try {
      let next: Config
      if (typeof body === 'string' && body !== '') next = parseConfigText(body, 'request body')
      else if (body !== undefined && body !== null && body !== '')
        next = parseConfig(body, 'request body')
      else if (configPath !== undefined) next = await loadConfigFile(configPath)
      else
        throw new SluiceError(
          'SLUICE_ERR_CONFIG_INVALID',
          'no config file to reload from; send the config in the body',
        )
      const lost = securityDowngrades(coordinator.config, next)
      if (lost.length > 0 && !next.server.securityDowngrade)
        throw new SluiceError('SLUICE_ERR_CONFIG_DOWNGRADE', lost.join('; '))
      const keys = holdingsKeys(next, process.env)
      // TLS material is re-read on every reload (certificate rotation); a listener started
      // without TLS cannot start serving it without a restart.
      if (next.server.tls !== undefined) {
        if (tls === undefined)
          throw new SluiceError(
            'SLUICE_ERR_CONFIG_INVALID',
            'server.tls: this coordinator started without TLS; restart it to serve TLS',
          )
        if (next.server.tls.clientCerts !== coordinator.config.server.tls?.clientCerts)
          throw new SluiceError(
            'SLUICE_ERR_CONFIG_INVALID',
            'server.tls.clientCerts: changing whether client certificates are required needs a restart',
          )
        const material = await loadTls(next.server.tls)
        ;(app.server as unknown as TlsServer).setSecureContext({
          key: material.key,
          cert: material.cert,
          ...(material.ca === undefined ? {} : { ca: material.ca }),
        })
      }
      coordinator.applyConfig(next)
      coordinator.setHoldingsKeys(keys)
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

  const tls = config.server.tls === undefined ? undefined : await loadTls(config.server.tls)
  const app = buildHttpApp({
    tls,
    coordinator,
    clock,
    logger,
    reload,
    ready: () => ready && !coordinator.closed,
  })
  const gateway = new Gateway(app.server, coordinator, clock, logger)
  const host = options.host ?? config.server.host
  const listenPort = options.port ?? config.server.port
  try {
    await app.listen({ host, port: listenPort })
  } catch (error) {
    await ledger?.close().catch(() => undefined)
    const code = (error as NodeJS.ErrnoException).code
    throw new SluiceError(
      'SLUICE_ERR_SERVER_LISTEN',
      code === 'EADDRINUSE'
        ? `${host}:${listenPort} is in use (another coordinator?): stop it, or pick another port with --port`
        : code === 'EACCES'
          ? `${host}:${listenPort}: permission denied (ports below 1024 need privileges)`
          : `${host}:${listenPort}: ${(error as Error).message}`,
      { cause: error },
    )
  }
  const address = app.server.address()
  const port = typeof address === 'object' && address !== null ? address.port : 0
  const urlHost = host.includes(':') ? `[${host}]` : host
  const scheme = tls === undefined ? { http: 'http', ws: 'ws' } : { http: 'https', ws: 'wss' }
  const advertiseUrl = advertise ?? `${scheme.ws}://${urlHost}:${port}${connectPath}`
  if (elected && advertise === undefined && (host === '0.0.0.0' || host === '::')) {
    await app.close()
    throw new SluiceError(
      'SLUICE_ERR_CONFIG_INVALID',
      `server.ha.advertise: needed when listening on ${host}; followers redirect clients there`,
    )
  }
  const parent = config.server.parent
  let upstream: Upstream | undefined
  if (parent !== undefined) {
    upstream = new Upstream(
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
  }
  let election: LeaderElection | undefined
  let haLedger: Ledger | undefined
  if (options.election !== undefined) election = options.election(advertiseUrl)
  else if (ha !== undefined) {
    const etcdElection = new EtcdElection({
      endpoints: ha.etcd,
      name: ha.name,
      ttlSec: ha.ttlSec,
      advertiseUrl,
      clock,
      logger,
    })
    election = etcdElection
    // Replicas keep their ledger in etcd, written in transactions fenced by the election key.
    if (dataDir !== false) {
      haLedger = etcdElection.ledger()
      coordinator.attachLedger(haLedger, undefined)
    }
  }
  if (election !== undefined) {
    const elected = election
    coordinator.fence(() => elected.leadingUntilMs())
    election.on('elected', () => {
      void (async () => {
        // Resume from what the last leader wrote; a ledger that cannot be read means learning.
        let restored: LedgerEntry[] | undefined
        if (haLedger !== undefined)
          restored = await haLedger.load().catch((error: unknown) => {
            logger.error({ err: error }, 'the ledger on etcd cannot be read; learning instead')
            return undefined
          })
        if (elected.leadingUntilMs() > clock.now()) {
          coordinator.becomeLeader(restored)
          events.emit('role', 'leader', advertiseUrl)
        }
      })()
    })
    election.on('deposed', (reason: string) => {
      coordinator.stepDown(undefined, reason)
      events.emit('role', 'follower', reason)
    })
    election.on('leader', (url: string | undefined) =>
      // Our own URL while we do not lead is a key of an earlier life of ours: nobody known yet.
      coordinator.setLeaderUrl(url === advertiseUrl ? undefined : url),
    )
    election.start()
  }
  ready = true
  logger.info(
    { url: `${scheme.http}://${urlHost}:${port}`, resources: config.resources.length },
    'coordinator listening',
  )

  let watcher: ConfigFileWatcher | undefined
  let lastText: string | undefined
  if (configPath !== undefined && options.watchConfig !== false) {
    lastText = await readFile(configPath, 'utf8').catch(() => undefined)
    watcher = new ConfigFileWatcher(configPath, clock, 200, {
      // Editors write in several steps: reload once things settle, and only if the text changed.
      changed: () => events.emit('config-file-changed'),
      settled: () => {
        readFile(configPath, 'utf8')
          .then((text) => {
            if (text === lastText) return
            lastText = text
            return reload()
          })
          .catch(() => undefined)
      },
      failed: (error) =>
        logger.warn({ err: error }, 'config watch failed; reload by SIGHUP or the admin API'),
    })
  }

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
