import { randomUUID } from 'node:crypto'
import { hostname } from 'node:os'
import type { Logger } from 'pino'
import { z } from 'zod'
import {
  SluiceError,
  clientIdSchema,
  describeIssues,
  failureModes,
  prioritySchema,
  quantitySchema,
  resourceKinds,
  systemClock,
  weightSchema,
  type Clock,
} from '../shared/index.js'
import { redirectHosts } from './redirect.js'
import { webSocketFactory, type SocketFactory } from './socket.js'

const wsUrl = z
  .string()
  .regex(/^wss?:\/\/[^\s/]+/, 'must be a ws:// or wss:// URL, e.g. ws://127.0.0.1:7070/v1/connect')

const pem = z.union([z.string().min(1), z.instanceof(Buffer)])

/** TLS for wss:// URLs: whom to trust, and this client's own certificate when the coordinator asks. */
const tlsSchema = z.strictObject({
  /** PEM CA bundle the coordinator's certificate must chain to; default: the system's CAs. */
  ca: pem.optional(),
  /** PEM certificate of this client (a coordinator with clientCerts: require). */
  cert: pem.optional(),
  /** PEM private key of `cert`. */
  key: pem.optional(),
  /** Refuse a certificate that does not verify; default true. Turn off only in a test. */
  rejectUnauthorized: z.boolean().default(true),
})

const optionsSchema = z.strictObject({
  /** One coordinator URL or several (tried in turn): ws://host:port/v1/connect or wss://… */
  url: z.union([wsUrl, z.array(wsUrl).min(1)], {
    error: (issue) =>
      issue.input === undefined
        ? 'required: the coordinator, e.g. ws://127.0.0.1:7070/v1/connect (or a list, tried in turn)'
        : 'must be a ws:// or wss:// URL, e.g. ws://127.0.0.1:7070/v1/connect, or a list of them',
  }),
  tls: tlsSchema.optional(),
  /**
   * Hosts a coordinator's redirect (a follower naming its leader) may send this client to,
   * besides the hosts of `url`; `'any'` for any. A redirect never changes the scheme.
   */
  redirectHosts: z.union([z.literal('any'), z.array(z.string().min(1)).max(64)]).optional(),
  clientId: clientIdSchema.optional(),
  /** Who this process is, as operators see it (dashboard, `sluice top`); default host name and pid. */
  name: z
    .string()
    .min(1)
    .max(128)
    .default(() => `${hostname()}:${process.pid}`),
  token: z.string().min(1).optional(),
  /** Reconnect backoff: first delay and cap, ms (full jitter: a random delay in [0, min(cap, base·2^n)]). */
  backoffBaseMs: z.number().int().min(1).default(100),
  backoffCapMs: z.number().int().min(1).default(10_000),
  /**
   * The cap while the coordinator's address refuses connections outright (ECONNREFUSED:
   * nothing listens there, as while a coordinator restarts), ms, when below `backoffCapMs`.
   * Such an attempt costs the coordinator nothing, so the backoff's only use left is to spread
   * the clients' return: they come back within this long of the coordinator listening.
   */
  backoffRefusedCapMs: z.number().int().min(1).default(500),
  /**
   * A remote decision (a check a process cannot decide by its own part: `check`, the HTTP
   * edge) asked while no connection is up waits for one, until this long after the connection
   * dropped (or after the client was made), ms; then, and for any asked later in the same
   * outage, refused. It covers a coordinator's restart (0.5 s down and its 0.35–0.55 s start,
   * measured: docs/keys.md) without refusing what a central limiter would admit; 0 refuses at
   * once, as before. Checks a process decides by its own part never wait.
   */
  reconnectWaitMs: z.number().int().min(0).max(60_000).default(1_500),
  /** Demand report period until a lease says otherwise, ms. */
  refreshMs: z.number().int().min(10).default(1_000),
  /** Early reports allowed per refresh period when throttled. */
  maxEarlyReportsPerRefresh: z.number().int().min(0).max(10).default(4),
  /**
   * Largest frame this client sends, bytes: demand reports, acks, releases and a hello's
   * holdings are split (or, holdings, cut) to fit, so a process with many keys never sends a
   * frame the coordinator closes the connection for (its limits.maxFrameBytes: 64 KiB unless
   * set). Default 32 KiB.
   */
  maxFrameBytes: z
    .number()
    .int()
    .min(1024)
    .max(16 * 1024 * 1024)
    .default(32 * 1024),
  /** A connection attempt not welcomed within this long is dropped and retried, ms. */
  connectTimeoutMs: z.number().int().min(10).max(600_000).default(10_000),
  /**
   * The clock `tryAcquire` reads: `coarse`, a cached reading refreshed every
   * millisecond by one timer (no system call per check, and never admits
   * more than exact), or `precise`, a clock read per check. Default coarse,
   * or precise when a `clock` is injected (tests and the simulator move it).
   */
  hotPathClock: z.enum(['coarse', 'precise']).optional(),
})

export interface ClientOptions extends z.input<typeof optionsSchema> {
  clock?: Clock | undefined
  logger?: Logger | undefined
  /** Uniform [0, 1) for backoff jitter; default Math.random. */
  random?: (() => number) | undefined
  /** Opens the connection; default a real WebSocket (the simulator passes its own). */
  socketFactory?: SocketFactory | undefined
}

export interface ResolvedClientOptions extends z.output<typeof optionsSchema> {
  readonly hotPathClock: 'coarse' | 'precise'
  readonly urls: readonly string[]
  /** Where a redirect may lead (the hosts of `urls` and `redirectHosts`), or anywhere. */
  readonly redirectTo: ReadonlySet<string> | 'any'
  readonly clientId: string
  readonly clock: Clock
  readonly logger: Logger | undefined
  readonly random: () => number
  readonly socketFactory: SocketFactory
}

export type ClientTlsOptions = z.input<typeof tlsSchema>

const clientKeys = [
  ...Object.keys(optionsSchema.shape),
  'clock',
  'logger',
  'random',
  'socketFactory',
]

/** Parses client options once and freezes them; errors name the option, the rule and the value. */
export function resolveClientOptions(options: ClientOptions): ResolvedClientOptions {
  const { clock, logger, random, socketFactory, ...rest } = options
  const result = optionsSchema.safeParse(rest, { reportInput: true })
  if (!result.success)
    throw new SluiceError(
      'SLUICE_ERR_OPTION_INVALID',
      `createClient: ${describeIssues(result.error, { knownKeys: clientKeys, hints: { urls: 'url takes one URL or a list' } })}`,
    )
  const parsed = result.data
  return Object.freeze({
    ...parsed,
    urls: Object.freeze(Array.isArray(parsed.url) ? [...parsed.url] : [parsed.url]),
    redirectTo: redirectHosts(
      Array.isArray(parsed.url) ? parsed.url : [parsed.url],
      parsed.redirectHosts,
    ),
    clientId: parsed.clientId ?? `sluice-${randomUUID()}`,
    clock: clock ?? systemClock,
    hotPathClock: parsed.hotPathClock ?? (clock === undefined ? 'coarse' : 'precise'),
    logger,
    random: random ?? Math.random,
    socketFactory: socketFactory ?? webSocketFactory,
  })
}

/** `client.resource(id, options)`: checked once, strictly, like the client's own options. */
export const resourceOptionsSchema = z.strictObject({
  wants: quantitySchema.optional(),
  weight: weightSchema.optional(),
  priority: prioritySchema.optional(),
  failureMode: z.enum(failureModes).default('safe'),
  kind: z.enum(resourceKinds).default('rate'),
  safeCapacity: quantitySchema.default(0),
  maxWaiters: z.number().int().min(0).max(10_000_000).default(10_000),
  committed: z
    .custom<() => number>((v) => typeof v === 'function', 'must be a function')
    .optional(),
})

/** What users of other rate limiters write, and what it is here. */
const resourceHints: Readonly<Record<string, string>> = {
  max: 'the capacity is the coordinator’s: set wants for demand',
  limit: 'the capacity is the coordinator’s: set wants for demand',
  points: 'the capacity is the coordinator’s: set wants for demand',
  rate: 'the capacity is the coordinator’s: set wants for demand',
  mode: 'failureMode',
}

/** `client.resource` options as parsed: every default in place, frozen. */
export type ResolvedResourceOptions = Readonly<z.output<typeof resourceOptionsSchema>>

/**
 * Parses `client.resource` options once (defaults from the schema) and freezes them; throws
 * SLUICE_ERR_OPTION_INVALID naming the option, the rule and the value.
 */
export function resolveResourceOptions(id: string, options: unknown): ResolvedResourceOptions {
  const result = resourceOptionsSchema.safeParse(options, { reportInput: true })
  if (!result.success)
    throw new SluiceError(
      'SLUICE_ERR_OPTION_INVALID',
      `client.resource(${JSON.stringify(id)}): ${describeIssues(result.error, {
        knownKeys: Object.keys(resourceOptionsSchema.shape),
        hints: resourceHints,
      })}`,
    )
  return Object.freeze(result.data)
}

/** `client.keyed(prefix, options)`: checked once, strictly. */
export const keyedOptionsSchema = z.strictObject({
  maxKeys: z.number().int().min(1).max(10_000_000).default(50_000),
  maxKeysPerReport: z.number().int().min(1).max(10_000).default(64),
  weight: weightSchema.optional(),
})

/** `client.keyed` options as parsed: every default in place, frozen. */
export type ResolvedKeyedOptions = Readonly<z.output<typeof keyedOptionsSchema>>

/**
 * Parses `client.keyed` options once (defaults from the schema) and freezes them; throws
 * SLUICE_ERR_OPTION_INVALID naming the option, the rule and the value.
 */
export function resolveKeyedOptions(prefix: string, options: unknown): ResolvedKeyedOptions {
  const result = keyedOptionsSchema.safeParse(options, { reportInput: true })
  if (!result.success)
    throw new SluiceError(
      'SLUICE_ERR_OPTION_INVALID',
      `client.keyed(${JSON.stringify(prefix)}): ${describeIssues(result.error, {
        knownKeys: Object.keys(keyedOptionsSchema.shape),
      })}`,
    )
  return Object.freeze(result.data)
}
