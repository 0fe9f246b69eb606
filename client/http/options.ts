import type { IncomingHttpHeaders, IncomingMessage, ServerResponse } from 'node:http'
import { z } from 'zod'
import { SluiceError, describeIssues, type Clock } from '../../shared/index.js'
import type { Limiter } from '../../shared/limiters/index.js'
import { KeyedFamily } from '../keyed/index.js'
import type { Resource } from '../resource.js'
import type { RateLimitPolicy } from './headers.js'

/** What the edge needs of a request, whatever the framework. */
export interface RequestInfo {
  readonly ip: string
  readonly method: string
  readonly headers: IncomingHttpHeaders
  /** The route pattern if the framework knows it, else the path. */
  readonly route: string
  /** The framework's own request (fastify's, Express's, or node's), for a key function. */
  readonly request?: FrameworkRequest | undefined
  /** The framework's own reply (fastify's `reply`, Express's or node's `res`). */
  readonly reply?: unknown
}

/**
 * The request a key function receives: the framework's own, as the peers'
 * `keyGenerator` gets it (fastify's `request`, Express's `req` with
 * `req.get` and `req.ip`, node's `IncomingMessage`): typed by what every one
 * has, and open to what each adds.
 */
export interface FrameworkRequest {
  readonly headers: IncomingHttpHeaders
  readonly method?: string | undefined
  readonly url?: string | undefined
  // What each framework adds (req.get, req.ip, request.routeOptions…): typed by the framework.
  // eslint-disable-next-line @typescript-eslint/no-explicit-any
  readonly [field: string]: any
}

/**
 * Where a request's key comes from: its address (`ip`), its route, a
 * header, or a function of the framework's own request and reply
 * (`(req, reply) => req.get('x-api-key')` in Express,
 * `(request) => request.headers['x-api-key']` in fastify).
 */
export type KeySource =
  | 'ip'
  | 'route'
  | { readonly header: string }
  | ((req: FrameworkRequest, reply: unknown) => string | undefined)

/**
 * What a request without a key gets (its header absent or empty, the key
 * function answering undefined or ''): `refuse` it (400,
 * SLUICE_ERR_HTTP_NO_KEY: the default, so leaving the key out never escapes
 * the limit), `skip` the limit, or count it under one shared `key`.
 */
export type MissingKey = 'refuse' | 'skip' | { readonly key: string }

/**
 * Which header fields a limited response carries. `draft-6`, `draft-7` and `draft-8` are
 * express-rate-limit's `standardHeaders` values (`draft-8` is the current form: `ietf`).
 */
export type HeaderSet =
  'ietf' | 'ietf-lean' | 'legacy' | 'both' | 'none' | 'draft-6' | 'draft-7' | 'draft-8'

/** What a refusal knows, for `errorResponse` and `onLimited`. */
export interface LimitContext {
  readonly key: string
  readonly statusCode: number
  /** Seconds until a retry can succeed (the Retry-After header). */
  readonly retryAfterSec: number
  /** Refused because the key is blocked (`blockMs`), not by a limiter. */
  readonly blocked: boolean
  /**
   * Which limit refused: the per-key limiter (its policy's name, `default` unless `policy.name`
   * says) or the shared one (the resource's id, a keyed family's prefix).
   */
  readonly limit: string
}

export interface RateLimitOptions {
  /**
   * A local limiter per key, made on the key's first request (so it may
   * depend on the request: a plan read from a header). Held in a
   * KeyedLimiter of at most `maxKeys`. `false` in a route: not the plugin's.
   */
  readonly limiter?: ((key: string, req: RequestInfo) => Limiter) | false | undefined
  /**
   * A coordinated rate resource (cluster-wide through `sluice/client`), or
   * one per key. With `limiter` too, a request must pass both. `false` in a
   * route: not the plugin's.
   */
  readonly resource?:
    Resource | ((key: string, req: RequestInfo) => Resource) | KeyedFamily | false | undefined
  /** What to limit by; default `ip`. */
  readonly key?: KeySource | undefined
  /** A request without a key: `refuse` (400, the default), `skip`, or `{ key }` (one shared bucket). */
  readonly missingKey?: MissingKey | undefined
  /** IPv6 clients are keyed by this prefix length (one /64 is one user); 128 or false: by address. Default 64. */
  readonly ipv6Subnet?: number | false | undefined
  /** Tokens a request costs; default 1. */
  readonly cost?: number | ((req: RequestInfo) => number) | undefined
  /** `police` rejects at once; `shape` delays up to `maxDelayMs`, then rejects. Default `police`. */
  readonly mode?: 'police' | 'shape' | undefined
  readonly maxDelayMs?: number | undefined
  /**
   * A keyed family's check that this process's part of the key cannot decide (an empty
   * bucket, a share too thin, a key hot elsewhere) is asked of the coordinator, which decides
   * it against its own part, as one central limiter would: one round trip for that request
   * only. Default true; false decides here only (`police` mode; `shape` waits here).
   */
  readonly remote?: boolean | undefined
  /**
   * What `remaining` (the headers' `r`, `X-RateLimit-Remaining`, `req.rateLimit.remaining`)
   * says of a keyed family's key: `cluster` (the default) what the key has left across the
   * cluster as well as this process knows it; `here` what this process will admit now, never
   * more than the caller can get here (docs/http.md, how exact each is).
   */
  readonly remaining?: 'cluster' | 'here' | undefined
  /** Keys never limited. */
  readonly allowList?: readonly string[] | undefined
  /** Requests never limited (health checks, say). */
  readonly skip?: ((req: RequestInfo) => boolean) | undefined
  /**
   * The quota the headers announce. Default: derived from the limiter (or
   * the resource's lease). When given, checked against the limiter.
   */
  readonly policy?: RateLimitPolicy | undefined
  /**
   * `ietf-lean` (the default: RateLimit on every response, RateLimit-Policy on a key's
   * first response and on refusals, when a caller needs it), `ietf` (both on every
   * response), `legacy` (X-RateLimit-*), `both`, `none`; and the
   * fields of express-rate-limit's `standardHeaders`: `draft-6` (RateLimit-Limit,
   * -Remaining, -Reset and RateLimit-Policy), `draft-7` (`RateLimit: limit=…, remaining=…,
   * reset=…` and RateLimit-Policy), `draft-8` (the same as `ietf`).
   */
  readonly headers?: HeaderSet | undefined
  /** Status of a refusal; default 429. */
  readonly statusCode?: number | undefined
  /** The body of a refusal (an object is sent as JSON, a string as text). */
  readonly errorResponse?: ((req: RequestInfo, context: LimitContext) => unknown) | undefined
  /**
   * A fixed body for every refusal (an object is sent as JSON, a string as text), as
   * express-rate-limit's `message`; `errorResponse` wins when both are given.
   */
  readonly message?: string | Record<string, unknown> | undefined
  /**
   * The middleware only: answers a refusal itself, as express-rate-limit's `handler`
   * (headers and Retry-After are already set; `res.statusCode` is not). The fastify plugin
   * refuses it: there, `errorResponse`.
   */
  readonly handler?:
    | ((
        req: IncomingMessage,
        res: ServerResponse,
        next: (error?: unknown) => void,
        context: LimitContext,
      ) => void)
    | undefined
  /**
   * The fastify plugin only: `false` limits only the routes with a `config.rateLimit` of their
   * own (the plugin's options are then their defaults), as @fastify/rate-limit's `global`.
   * Default true: every route.
   */
  readonly global?: boolean | undefined
  /** Called on every refusal. */
  readonly onLimited?: ((req: RequestInfo, context: LimitContext) => void) | undefined
  /** Called on every request let through by a limit (as @fastify/rate-limit's onExceeding). */
  readonly onExceeding?: ((req: RequestInfo, key: string) => void) | undefined
  /** A response below 400 gives its cost back to the local limiter. */
  readonly skipSuccessfulRequests?: boolean | undefined
  /** A response of 400 or more gives its cost back to the local limiter. */
  readonly skipFailedRequests?: boolean | undefined
  /** A key refused once is refused for this long, without asking its limiter. Default 0: off. */
  readonly blockMs?: number | undefined
  /** Most keys the local limiters (and blocks) keep; default 10 000. */
  readonly maxKeys?: number | undefined
  readonly clock?: Clock | undefined
}

const fn = <T>() => z.custom<T>((v) => typeof v === 'function', { error: 'must be a function' })

const resourceLike = z.custom<Resource | KeyedFamily>(
  (v) =>
    v instanceof KeyedFamily ||
    (typeof v === 'object' &&
      v !== null &&
      typeof (v as Resource).tryAcquire === 'function' &&
      typeof (v as Resource).id === 'string'),
  {
    error:
      'must be a resource from client.resource(id), a family from client.keyed(prefix), or (key, req) => Resource',
  },
)

const positive = z.number().positive().finite()

const schema = z
  .strictObject({
    limiter: z.union([fn<(key: string, req: RequestInfo) => Limiter>(), z.literal(false)], {
      error: 'must be (key, req) => Limiter, e.g. () => new TokenBucketLimiter({ ratePerSec: 5 })',
    }),
    resource: z.union(
      [resourceLike, fn<(key: string, req: RequestInfo) => Resource>(), z.literal(false)],
      {
        error:
          'must be a resource from client.resource(id), a family from client.keyed(prefix), or (key, req) => Resource',
      },
    ),
    key: z.union(
      [
        z.enum(['ip', 'route']),
        z.strictObject({ header: z.string().min(1) }),
        fn<(req: FrameworkRequest, reply: unknown) => string | undefined>(),
      ],
      { error: "must be 'ip', 'route', { header: 'x-api-key' } or (req, reply) => string" },
    ),
    missingKey: z.union([z.enum(['refuse', 'skip']), z.strictObject({ key: z.string().min(1) })], {
      error: "must be 'refuse', 'skip' or { key: 'anonymous' }",
    }),
    ipv6Subnet: z.union([z.number().int().min(1).max(128), z.literal(false)]),
    cost: z.union([positive, fn<(req: RequestInfo) => number>()], {
      error: 'must be a number > 0 or (req) => number',
    }),
    mode: z.enum(['police', 'shape']),
    maxDelayMs: z.number().min(0).finite(),
    remote: z.boolean(),
    remaining: z.enum(['cluster', 'here']),
    allowList: z.array(z.string()),
    skip: fn<(req: RequestInfo) => boolean>(),
    policy: z.strictObject({
      name: z.string().min(1).optional(),
      quota: positive,
      windowSec: positive,
    }),
    headers: z.enum([
      'ietf',
      'ietf-lean',
      'legacy',
      'both',
      'none',
      'draft-6',
      'draft-7',
      'draft-8',
    ]),
    statusCode: z.number().int().min(400).max(599),
    errorResponse: fn<(req: RequestInfo, context: LimitContext) => unknown>(),
    message: z.union([z.string(), z.record(z.string(), z.unknown())], {
      error: 'must be a string (sent as text) or an object (sent as JSON)',
    }),
    handler:
      fn<
        (
          req: IncomingMessage,
          res: ServerResponse,
          next: (error?: unknown) => void,
          context: LimitContext,
        ) => void
      >(),
    global: z.boolean(),
    onLimited: fn<(req: RequestInfo, context: LimitContext) => void>(),
    onExceeding: fn<(req: RequestInfo, key: string) => void>(),
    skipSuccessfulRequests: z.boolean(),
    skipFailedRequests: z.boolean(),
    blockMs: z.number().min(0).finite(),
    maxKeys: z.number().int().min(1),
    clock: z.custom<Clock>(
      (v) => typeof v === 'object' && v !== null && typeof (v as Clock).now === 'function',
      { error: 'must be a Clock (now, setTimeout)' },
    ),
  })
  .partial()

/** What users of @fastify/rate-limit, express-rate-limit and rate-limiter-flexible write, and what it is here. */
const perKeyRate =
  "per key across every process: resource: client.keyed('<prefix>') on a template { match: '<prefix>/*', keyed: true, capacity, per: '1m' } (docs/keys.md); in this process only: limiter: () => new TokenBucketLimiter({ ratePerSec, burst })"
const perKeyWindow =
  "a fixed window per key across every process: resource: client.keyed('<prefix>') on a template { match: '<prefix>/*', keyed: true, kind: quota, capacity: <limit>, window: '1m' } (docs/keys.md); in this process only: limiter: () => new FixedWindow({ limit, windowMs })"
const shared =
  "resource: client.keyed('<prefix>') for a per-key limit shared by every process, client.resource(id) for one limit shared by all (no store needed; docs/http.md, 'Coming from express-rate-limit or @fastify/rate-limit')"
const hints: Readonly<Record<string, string>> = {
  keyGenerator: 'key: (req) => string',
  max: perKeyRate,
  limit: perKeyWindow,
  points: perKeyRate,
  timeWindow: perKeyWindow,
  windowMs: perKeyWindow,
  duration: perKeyWindow,
  errorResponseBuilder: 'errorResponse: (req, context) => body',
  onExceeded: 'onLimited: (req, context) => void',
  onLimitReached: 'onLimited: (req, context) => void',
  addHeaders: "headers: 'ietf' | 'ietf-lean' | 'legacy' | 'both' | 'none'",
  addHeadersOnExceeding: "headers: 'ietf' | 'ietf-lean' | 'legacy' | 'both' | 'none'",
  enableDraftSpec:
    "headers: 'ietf' (or the default 'ietf-lean': the policy when a caller needs it)",
  standardHeaders:
    "headers: 'draft-6' | 'draft-7' | 'draft-8' (standardHeaders' values; 'ietf' is draft-8)",
  legacyHeaders: "headers: 'legacy' (X-RateLimit-* only) or 'both' (with the IETF fields)",
  ban: 'blockMs: a key refused once is refused for this long',
  blockDuration: 'blockMs (milliseconds)',
  whitelist: 'allowList',
  allowlist: 'allowList',
  store: shared,
  redis: shared,
}

function invalid(where: string, detail: string): never {
  throw new SluiceError('SLUICE_ERR_OPTION_INVALID', `${where}: ${detail}`)
}

/** Checks an option set (the plugin's or a route's) strictly; throws SLUICE_ERR_OPTION_INVALID naming the option. */
export function checkRateLimitOptions(options: unknown, where: string): RateLimitOptions {
  if (typeof options !== 'object' || options === null)
    invalid(where, `options must be an object, received ${String(options)}`)
  const result = schema.safeParse(options, { reportInput: true })
  if (!result.success)
    invalid(where, describeIssues(result.error, { knownKeys: Object.keys(schema.shape), hints }))
  // Keep the caller's objects (a resource is used, not copied): the parse only checked them.
  return options
}

/**
 * A route's options over the plugin's: each key the route gives replaces the
 * plugin's; `limiter: false` or `resource: false` drops the plugin's. A
 * policy goes with its limiter: a route with its own limiter does not
 * inherit the plugin's policy.
 */
export function mergeRateLimitOptions(
  base: RateLimitOptions,
  route: RateLimitOptions,
): RateLimitOptions {
  const merged: RateLimitOptions = { ...base, ...route }
  if (route.limiter !== undefined && route.policy === undefined)
    return { ...merged, policy: undefined }
  return merged
}

/** The defaults of the options that have one, in one place (docs/http.md lists them). */
const rateLimitDefaults = {
  key: 'ip',
  missingKey: 'refuse',
  maxDelayMs: 1000,
  maxKeys: 10_000,
  statusCode: 429,
  ipv6Subnet: 64,
  blockMs: 0,
  remote: true,
  remaining: 'cluster',
} as const

/** A whole option set, checked, with every default in place. */
export type FinalRateLimitOptions = RateLimitOptions & {
  readonly key: KeySource
  readonly missingKey: MissingKey
  readonly maxDelayMs: number
  readonly maxKeys: number
  readonly statusCode: number
  readonly ipv6Subnet: number | false
  readonly blockMs: number
  readonly remote: boolean
  readonly remaining: 'cluster' | 'here'
}

/** Checks what only a whole option set can show; fills in the defaults and freezes it. */
export function finalRateLimitOptions(
  options: RateLimitOptions,
  where: string,
): FinalRateLimitOptions {
  const limiter = options.limiter === false ? undefined : options.limiter
  const resource = options.resource === false ? undefined : options.resource
  if (limiter === undefined && resource === undefined)
    invalid(
      where,
      'give `limiter` (a local limit per key), `resource` (a cluster-wide one), or both',
    )
  if (limiter === undefined && (options.skipSuccessfulRequests || options.skipFailedRequests))
    invalid(
      where,
      'skipSuccessfulRequests and skipFailedRequests give tokens back to the local `limiter`; a coordinated resource’s tokens are the cluster’s and are not given back: add a limiter',
    )
  if (limiter === undefined && options.policy !== undefined)
    invalid(where, '`policy` describes the local `limiter`; a resource’s policy is its lease')
  const withDefaults: Record<string, unknown> = { ...rateLimitDefaults }
  for (const [k, v] of Object.entries(options)) if (v !== undefined) withDefaults[k] = v
  return Object.freeze({
    ...(withDefaults as unknown as FinalRateLimitOptions),
    limiter,
    resource,
  })
}
