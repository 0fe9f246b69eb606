import type { IncomingHttpHeaders } from 'node:http'
import {
  SluiceError,
  describeValue,
  errorCatalogue,
  systemClock,
  type Clock,
} from '../../shared/index.js'
import { KeyedLimiter, type Limiter } from '../limiters/index.js'
import type { Resource } from '../resource.js'
import {
  policyHeader,
  rateLimitHeader,
  retryAfterSeconds,
  type RateLimitPolicy,
} from './headers.js'

/** What the edge needs of a request, whatever the framework. */
export interface RequestInfo {
  readonly ip: string
  readonly headers: IncomingHttpHeaders
  /** The route pattern if the framework knows it, else the path. */
  readonly route: string
}

export type KeySource =
  'ip' | 'route' | { readonly header: string } | ((req: RequestInfo) => string)

export interface RateLimitOptions {
  /** A local limiter per key, made by this factory (held in a KeyedLimiter). */
  readonly limiter?: ((key: string) => Limiter) | undefined
  /** A coordinated resource (cluster-wide through `sluice/client`), or one per key. Rate resources only. */
  readonly resource?: Resource | ((key: string) => Resource) | undefined
  /** What to limit by; default `ip`. */
  readonly key?: KeySource | undefined
  /** Tokens a request costs; default 1. */
  readonly cost?: number | ((req: RequestInfo) => number) | undefined
  /** `police` rejects at once; `shape` delays up to `maxDelayMs`, then rejects. Default `police`. */
  readonly mode?: 'police' | 'shape' | undefined
  readonly maxDelayMs?: number | undefined
  /** Keys never limited. */
  readonly allowList?: readonly string[] | undefined
  /** Requests never limited (health checks, say). */
  readonly skip?: ((req: RequestInfo) => boolean) | undefined
  /** For the RateLimit-Policy header; for a resource, default: its lease per second. Required with `limiter`. */
  readonly policy?: RateLimitPolicy | undefined
  /** Most keys the local limiters keep; default 10 000. */
  readonly maxKeys?: number | undefined
  readonly clock?: Clock | undefined
}

export interface Decision {
  readonly allowed: boolean
  /** Headers for the response, allowed or not. */
  readonly headers: Record<string, string>
  /** The 429 body when not allowed. */
  readonly body:
    | { error: { code: 'SLUICE_ERR_HTTP_RATE_LIMITED'; message: string; retryable: true } }
    | undefined
}

interface Target {
  tryAcquire(cost: number): boolean
  acquire(cost: number, options: { maxWaitMs?: number | undefined }): Promise<unknown>
  msUntil(cost: number): number
  remaining?(): number
}

function invalid(detail: string): never {
  throw new SluiceError('SLUICE_ERR_OPTION_INVALID', `rate limit: ${detail}`)
}

/**
 * The decision shared by the fastify plugin and the framework-free
 * middleware: key the request, check (or wait on) its limiter, and say
 * which headers and body to answer with. Options are checked once.
 */
export class RateLimitCore {
  readonly #options: RateLimitOptions
  readonly #keyed: KeyedLimiter | undefined
  readonly #allow: ReadonlySet<string>
  readonly #maxDelayMs: number
  /** Formatted once when the policy is fixed. */
  readonly #policyHeader: string | undefined

  constructor(options: RateLimitOptions) {
    if ((options.limiter === undefined) === (options.resource === undefined))
      invalid('give exactly one of `limiter` and `resource`')
    if (options.limiter !== undefined && options.policy === undefined)
      invalid(
        '`policy` ({ quota, windowSec }) is required with `limiter`, for the RateLimit-Policy header',
      )
    if (
      options.policy !== undefined &&
      !(options.policy.quota > 0 && options.policy.windowSec > 0)
    ) {
      invalid(
        `policy.quota and policy.windowSec must be > 0, received ${describeValue(options.policy)}`,
      )
    }
    const maxDelayMs = options.maxDelayMs ?? 1000
    if (!(maxDelayMs >= 0) || !Number.isFinite(maxDelayMs))
      invalid(
        `maxDelayMs must be a finite number ≥ 0, received ${describeValue(options.maxDelayMs)}`,
      )
    this.#options = Object.freeze({ ...options })
    this.#maxDelayMs = maxDelayMs
    this.#allow = new Set(options.allowList ?? [])
    this.#policyHeader = options.policy === undefined ? undefined : policyHeader(options.policy)
    this.#keyed =
      options.limiter === undefined
        ? undefined
        : new KeyedLimiter(options.limiter, {
            maxKeys: options.maxKeys,
            clock: options.clock ?? systemClock,
          })
  }

  keyOf(req: RequestInfo): string {
    const source = this.#options.key ?? 'ip'
    if (source === 'ip') return req.ip
    if (source === 'route') return req.route
    if (typeof source === 'function') return source(req)
    const value = req.headers[source.header.toLowerCase()]
    return Array.isArray(value) ? (value[0] ?? '') : (value ?? '')
  }

  /**
   * The decision for a request: synchronous, except when shaping has to
   * wait (then a promise), so the allow path costs no promise.
   */
  decide(req: RequestInfo): Decision | undefined | Promise<Decision | undefined> {
    const o = this.#options
    if (o.skip?.(req) === true) return undefined
    const key = this.keyOf(req)
    if (this.#allow.has(key)) return undefined
    const cost = typeof o.cost === 'function' ? o.cost(req) : (o.cost ?? 1)
    const target = this.#target(key)
    if (target.tryAcquire(cost)) return this.#answer(key, target, true, cost)
    if (o.mode === 'shape' && target.msUntil(cost) <= this.#maxDelayMs) {
      return target.acquire(cost, { maxWaitMs: this.#maxDelayMs }).then(
        () => this.#answer(key, target, true, cost),
        () => this.#answer(key, target, false, cost),
      )
    }
    return this.#answer(key, target, false, cost)
  }

  #answer(key: string, target: Target, allowed: boolean, cost: number): Decision {
    const o = this.#options
    const policy = o.policy ?? this.#resourcePolicy(key)
    const waitMs = allowed ? target.msUntil(1) : target.msUntil(cost)
    const remaining = target.remaining?.() ?? (target.msUntil(1) === 0 ? 1 : 0)
    const resetSec = Number.isFinite(waitMs) ? waitMs / 1000 : policy.windowSec
    const headers: Record<string, string> = {
      'ratelimit-policy': this.#policyHeader ?? policyHeader(policy),
      ratelimit: rateLimitHeader(policy, remaining, resetSec),
    }
    if (allowed) return { allowed, headers, body: undefined }
    headers['retry-after'] = String(
      retryAfterSeconds(Number.isFinite(waitMs) ? waitMs : policy.windowSec * 1000),
    )
    return {
      allowed,
      headers,
      body: {
        error: {
          code: 'SLUICE_ERR_HTTP_RATE_LIMITED',
          message: errorCatalogue.SLUICE_ERR_HTTP_RATE_LIMITED.message,
          retryable: true,
        },
      },
    }
  }

  #target(key: string): Target {
    const o = this.#options
    // One look-up per request: the key's limiter is the target.
    if (this.#keyed !== undefined) return this.#keyed.get(key)
    const resource = typeof o.resource === 'function' ? o.resource(key) : o.resource!
    return resource
  }

  #resourcePolicy(key: string): RateLimitPolicy {
    const o = this.#options
    const resource = typeof o.resource === 'function' ? o.resource(key) : o.resource!
    return { name: resource.id, quota: Math.max(1, resource.capacity), windowSec: 1 }
  }
}
