import {
  CoarseClock,
  SluiceError,
  describeValue,
  errorCatalogue,
  formatError,
  keyProblem,
  systemClock,
  type Clock,
} from '../../shared/index.js'
import { KeyedLimiter, type Limiter, type LimiterShape } from '../../shared/limiters/index.js'
import { KeyView, KeyedFamily } from '../keyed/index.js'
import type { Resource } from '../resource.js'
import type { RemoteAnswer } from '../remote.js'
import {
  limitHeaders,
  policyHeader,
  rateLimitPrefix,
  retryAfterSeconds,
  type LimitState,
  type RateLimitPolicy,
} from './headers.js'
import { ipKey } from './keys.js'
import {
  checkRateLimitOptions,
  finalRateLimitOptions,
  type HeaderSet,
  type LimitContext,
  type FinalRateLimitOptions,
  type RateLimitOptions,
  type RequestInfo,
} from './options.js'

/** A limit shared with the cluster: a resource, or one key of a keyed family. */
export type SharedLimit = Pick<
  Resource,
  'tryAcquire' | 'msUntil' | 'acquire' | 'id' | 'describe' | 'remaining' | 'msUntilReset'
> & {
  /** A keyed family's key: what it has left across the cluster, as this process knows it. */
  readonly clusterRemaining?: () => number
}

export interface Decision {
  readonly allowed: boolean
  /** The status of a refusal (429 unless `statusCode` says otherwise). */
  readonly statusCode: number
  /** Header fields for the response, allowed or not. */
  readonly headers: Record<string, string>
  /** The refusal body: sent as JSON, or as text when a string. Undefined when allowed. */
  readonly body: unknown
  /** The local limiter charged, when the response may give the cost back (`settle`). */
  readonly charged: Limiter | undefined
  readonly cost: number
  /** The request's key, and the limits it was checked against (for `info`). */
  readonly key: string
  readonly limiter: Limiter | undefined
  readonly shared: SharedLimit | undefined
  /**
   * A request the coordinator admitted (remote decisions): what it said the key has left after
   * it, the shared limit's remaining with `remaining: 'cluster'` (this gateway holds nothing of
   * the key to say it by). Undefined otherwise.
   */
  readonly remoteRemaining: number | undefined
  /**
   * A refusal's context (what `onLimited` and `errorResponse` were given); undefined when
   * allowed, and for a request refused for its key (400: the key cannot be a family's).
   */
  readonly context: LimitContext | undefined
}

/** What express-rate-limit puts on `req.rateLimit`: the tightest limit the request was checked against. */
export interface RateLimitInfo {
  /** Its quota per window (0 when the limit cannot say). */
  readonly limit: number
  /** Used of it in the window: limit − remaining. */
  readonly used: number
  readonly remaining: number
  /** When the quota is whole again. */
  readonly resetTime: Date
  readonly key: string
}

/** The policy a limiter's shape announces: the window its burst refills in, and that window's quota. */
export function derivePolicy(shape: LimiterShape & { windowSec?: number }): RateLimitPolicy {
  // A quota says its window outright.
  if (shape.windowSec !== undefined)
    return { quota: Math.floor(shape.burst + 1e-9), windowSec: shape.windowSec }
  if (!(shape.ratePerSec > 0)) return { quota: 0, windowSec: 1 }
  const windowSec = Math.max(1, Math.ceil(shape.burst / shape.ratePerSec - 1e-9))
  return { quota: Math.floor(shape.ratePerSec * windowSec + 1e-9), windowSec }
}

/**
 * Whether a stated policy tells the truth about a limiter: in any window of
 * `w` seconds it admits at least `ratePerSec·w` (sustained) and at most
 * `burst + ratePerSec·w`; a quota outside that range misleads clients.
 */
export function policyFits(policy: RateLimitPolicy, shape: LimiterShape): boolean {
  const sustained = shape.ratePerSec * policy.windowSec
  const slack = 1e-6 * Math.max(1, sustained)
  return (
    policy.quota + slack >= Math.floor(sustained + slack) &&
    policy.quota <= shape.burst + sustained + slack
  )
}

function describePolicy(p: RateLimitPolicy): string {
  return `{ quota: ${p.quota}, windowSec: ${p.windowSec} }`
}

/**
 * What the per-key limiters' bookkeeping (idle keys, recency) reads when no
 * clock is given: a reading refreshed every 100 ms by one timer per process
 * (it stops when unread), instead of a clock read per request. It lags, so a
 * key is forgotten at most 100 ms late; the limiters keep their own clocks.
 */
let bookkeeping: CoarseClock | undefined
function bookkeepingClock(): Clock {
  return (bookkeeping ??= new CoarseClock(systemClock, 100))
}

const noRequest: RequestInfo = Object.freeze({ ip: '', method: 'GET', headers: {}, route: '' })

/**
 * The decision shared by the fastify plugin and the framework-free
 * middleware: key the request, check (or wait on) its limits, and say
 * which headers and body to answer with. Options are checked once, at
 * construction.
 */
export class RateLimitCore {
  readonly options: FinalRateLimitOptions
  /** Whether a response must be reported (`settle`) to give costs back. */
  readonly settles: boolean
  readonly #limiter: ((key: string, req: RequestInfo) => Limiter) | undefined
  readonly #resource: Resource | ((key: string, req: RequestInfo) => Resource) | undefined
  /** A keyed family: each request's key is a limit of its own across the cluster. */
  readonly #family: KeyedFamily | undefined
  readonly #keyed: KeyedLimiter | undefined
  readonly #allowList: ReadonlySet<string>
  readonly #clock: Clock
  readonly #maxDelayMs: number
  /** Whether a keyed family's key this process cannot decide is asked of the coordinator. */
  readonly #remote: boolean
  /** Whether a keyed family's key's remaining is the cluster's (else this process's part). */
  readonly #clusterRemaining: boolean
  readonly #maxKeys: number
  readonly #statusCode: number
  readonly #headerSet: Exclude<HeaderSet, 'draft-8'>
  /** The IETF fields only (`ietf` or `ietf-lean`): the common case, made with the least work. */
  readonly #ietfOnly: boolean
  /** RateLimit-Policy on every response (all but `ietf-lean`). */
  readonly #policyAlways: boolean
  /** With `ietf-lean` and no per-key limiter: the resources whose policy a response has stated. */
  readonly #stated = new WeakSet<object>()
  readonly #subnet: number | false
  /** The key's header, lower case (`key: { header }`). */
  readonly #header: string
  #warnedNoKey = false
  /** Whether `missingKey` was left to its default (its use is then warned once). */
  readonly #missingKeyDefaulted: boolean
  readonly #policyName: string
  /** Keys blocked until a time (`blockMs`), oldest first. */
  readonly #blocked = new Map<string, number>()
  /** The policy each limiter announces, worked out once. */
  readonly #policies = new WeakMap<Limiter, RateLimitPolicy | null>()
  /** Each limiter's RateLimit-Policy field, made once (null: it has no policy to state). */
  readonly #policyTexts = new WeakMap<Limiter, string | null>()
  /** The RateLimit-Policy field of a stated policy, the same for every limiter. */
  readonly #statedPolicyText: string | undefined
  /** The start of the RateLimit field, before r and t: the policy's name. */
  readonly #rateLimitPrefix: string
  /** The request whose key is being made, for the limiter factory. */
  #making: RequestInfo = noRequest
  /** Set when the per-key limiters make one: the request is its key's first (`ietf-lean`'s policy). */
  #made = false
  /**
   * The last RateLimit field made, and its r and t: most responses repeat it
   * (every client well under its limit answers r = burst - cost, t = the
   * seconds to earn the cost back), and a repeated text is neither built nor
   * flattened again.
   */
  #lastRemaining = -1
  #lastResetSec = -1
  #lastRateLimit = ''

  constructor(options: RateLimitOptions, where = 'rate limit') {
    const o = finalRateLimitOptions(checkRateLimitOptions(options, where), where)
    this.#missingKeyDefaulted = options.missingKey === undefined
    this.options = o
    this.#limiter = o.limiter === false ? undefined : o.limiter
    const shared = o.resource === false ? undefined : o.resource
    this.#family = shared instanceof KeyedFamily ? shared : undefined
    this.#resource = shared instanceof KeyedFamily ? undefined : shared
    this.#clock = o.clock ?? systemClock
    this.#maxDelayMs = o.maxDelayMs
    this.#remote = o.remote && (o.mode ?? 'police') === 'police'
    this.#clusterRemaining = o.remaining === 'cluster'
    this.#maxKeys = o.maxKeys
    this.#statusCode = o.statusCode
    // draft-8 is the structured form the current draft keeps: the IETF fields.
    this.#headerSet =
      o.headers === undefined ? 'ietf-lean' : o.headers === 'draft-8' ? 'ietf' : o.headers
    this.#ietfOnly = this.#headerSet === 'ietf' || this.#headerSet === 'ietf-lean'
    this.#policyAlways = this.#headerSet !== 'ietf-lean'
    this.#subnet = o.ipv6Subnet
    this.#header = typeof o.key === 'object' ? o.key.header.toLowerCase() : ''
    this.#policyName = o.policy?.name ?? 'default'
    this.#statedPolicyText =
      o.policy === undefined ? undefined : policyHeader({ ...o.policy, name: this.#policyName })
    this.#rateLimitPrefix = rateLimitPrefix(this.#policyName)
    this.#allowList = new Set(o.allowList ?? [])
    this.settles = o.skipSuccessfulRequests === true || o.skipFailedRequests === true
    const factory = this.#limiter
    this.#keyed =
      factory === undefined
        ? undefined
        : new KeyedLimiter(
            (key: string) => {
              this.#made = true
              return this.#checked(factory(key, this.#making))
            },
            {
              maxKeys: this.#maxKeys,
              clock: o.clock ?? bookkeepingClock(),
            },
          )
    // A factory that ignores the request makes the same limiter for every key:
    // check the policy against one now, so a lie fails registration.
    if (factory !== undefined && o.policy !== undefined && factory.length < 2)
      this.#checked(factory('', noRequest))
  }

  #checked(limiter: Limiter): Limiter {
    if (typeof limiter?.tryAcquire !== 'function')
      throw new SluiceError(
        'SLUICE_ERR_OPTION_INVALID',
        `rate limit: limiter must return a Limiter (tryAcquire, acquire, msUntil), received ${describeValue(limiter)}`,
      )
    const stated = this.options.policy
    const shape = limiter.describe?.()
    if (stated !== undefined && shape !== undefined && !policyFits(stated, shape))
      throw new SluiceError(
        'SLUICE_ERR_OPTION_INVALID',
        `rate limit: policy ${describePolicy(stated)} is not what the limiter admits (${shape.ratePerSec}/s, burst ${shape.burst}: between ${Math.floor(shape.ratePerSec * stated.windowSec)} and ${Math.floor(shape.burst + shape.ratePerSec * stated.windowSec)} per ${stated.windowSec} s); leave policy out to derive it (${describePolicy(derivePolicy(shape))})`,
      )
    return limiter
  }

  /** The request's key; undefined when it has none (see `missingKey`). */
  keyOf(req: RequestInfo): string | undefined {
    const source = this.options.key
    let key: unknown
    if (source === 'ip') key = req.ip === '' ? undefined : ipKey(req.ip, this.#subnet)
    else if (source === 'route') key = req.route
    else if (typeof source === 'function') key = source(req.request ?? req, req.reply)
    else {
      const value = req.headers[this.#header]
      key = Array.isArray(value) ? value[0] : value
    }
    if (key === undefined || key === null || key === '') return undefined
    // A key function typed loosely (plain JS) may answer a number: its text is the key.
    return typeof key === 'string'
      ? key
      : typeof key === 'number'
        ? String(key)
        : JSON.stringify(key)
  }

  /**
   * The decision for a request, or undefined when it is not limited:
   * synchronous, except when shaping has to wait (then a promise), so the
   * allow path costs no promise.
   */
  decide(req: RequestInfo): Decision | undefined | Promise<Decision | undefined> {
    const o = this.options
    if (o.skip?.(req) === true) return undefined
    let key = this.keyOf(req)
    if (key === undefined) {
      const rule = o.missingKey
      if (rule === 'skip') return undefined
      if (rule === 'refuse') return this.#noKey()
      key = rule.key
    }
    if (this.#allowList.size > 0 && this.#allowList.has(key)) return undefined
    // A keyed family holds keys the protocol can carry (shared/keys.ts): any other is the
    // caller's error (400), never tracked, never reported (an odd key once closed the process's
    // connection, and with it every limit).
    if (this.#family !== undefined) {
      const problem = keyProblem(this.#family.prefix, key)
      if (problem !== undefined) return this.#badKey(key, problem)
    }
    if (this.#blocked.size > 0) {
      const until = this.#blocked.get(key)
      if (until !== undefined) {
        const waitMs = until - this.#clock.now()
        if (waitMs > 0) return this.#blockedAnswer(req, key, waitMs)
        this.#blocked.delete(key)
      }
    }
    const cost = typeof o.cost === 'function' ? o.cost(req) : (o.cost ?? 1)
    let limiter: Limiter | undefined
    // Whether this request is its key's first (its limiter was just made).
    let first = false
    if (this.#keyed !== undefined) {
      this.#making = req
      this.#made = false
      limiter = this.#keyed.get(key)
      first = this.#made
      this.#making = noRequest
    }
    const resource = this.#resourceOf(key, req)
    let charged = false
    if (limiter === undefined || (charged = limiter.tryAcquire(cost))) {
      if (resource === undefined)
        return this.#allowed(req, key, limiter, resource, cost, first, true)
      // A keyed family's key this process's part cannot decide is asked of the coordinator.
      const decided =
        this.#remote && resource instanceof KeyView
          ? resource.decide(cost)
          : resource.tryAcquire(cost)
      if (decided === true) return this.#allowed(req, key, limiter, resource, cost, first, true)
      if (decided !== false)
        return this.#remotely(
          req,
          key,
          limiter,
          (resource as KeyView).detach(),
          cost,
          charged,
          first,
          decided,
        )
      // The shared limit refused: the per-key one should not pay for it.
      if (charged && limiter?.refund !== undefined) {
        limiter.refund(cost)
        charged = false
      }
    }
    if (o.mode === 'shape') {
      const waitMs = Math.max(
        charged ? 0 : (limiter?.msUntil(cost) ?? 0),
        resource?.msUntil(cost) ?? 0,
      )
      if (waitMs <= this.#maxDelayMs)
        return this.#shape(
          req,
          key,
          limiter,
          // A family's cursor moves with the next request: a wait keeps a view of its own.
          resource instanceof KeyView ? resource.detach() : resource,
          cost,
          charged,
          first,
        )
    }
    return this.#refused(req, key, limiter, resource, cost, charged)
  }

  /**
   * The tightest limit a decision was checked against, as express-rate-limit's
   * `req.rateLimit` says it (read now: made only when asked for).
   */
  info(decision: Decision): RateLimitInfo {
    let limit = 0
    let remaining = Infinity
    let resetMs = 0
    if (decision.limiter !== undefined) {
      const state = this.#stateOf(decision.limiter, false)
      remaining = state.remaining
      resetMs = state.resetSec * 1000
      limit = this.#policyOf(decision.limiter)?.quota ?? 0
    }
    const shared = decision.shared
    const sharedRemaining =
      shared === undefined ? Infinity : (decision.remoteRemaining ?? this.#remainingOf(shared))
    if (shared !== undefined && sharedRemaining < remaining) {
      remaining = sharedRemaining
      resetMs = shared.msUntilReset()
      limit = derivePolicy(shared.describe()).quota
    }
    if (!Number.isFinite(remaining)) remaining = 0
    remaining = Math.max(0, Math.floor(remaining))
    return {
      limit,
      used: Math.max(0, limit - remaining),
      remaining,
      resetTime: new Date(this.#clock.wallNow() + Math.ceil(resetMs)),
      key: decision.key,
    }
  }

  /** After the response: gives the cost back to the local limiter when the skip options say so. */
  settle(decision: Decision, statusCode: number): void {
    const o = this.options
    if (decision.charged === undefined) return
    if (statusCode < 400 ? o.skipSuccessfulRequests === true : o.skipFailedRequests === true)
      decision.charged.refund?.(decision.cost)
  }

  /** The coordinator's answer for a check this process's part of a key could not decide. */
  async #remotely(
    req: RequestInfo,
    key: string,
    limiter: Limiter | undefined,
    view: KeyView,
    cost: number,
    charged: boolean,
    first: boolean,
    decided: Promise<RemoteAnswer>,
  ): Promise<Decision> {
    const answer = await decided
    if (answer.admitted)
      return this.#allowed(req, key, limiter, view, cost, first, true, answer.remaining)
    if (charged && limiter?.refund !== undefined) {
      limiter.refund(cost)
      charged = false
    }
    return this.#refused(req, key, limiter, view, cost, charged, answer.retryAfterMs)
  }

  async #shape(
    req: RequestInfo,
    key: string,
    limiter: Limiter | undefined,
    resource: SharedLimit | undefined,
    cost: number,
    charged: boolean,
    first: boolean,
  ): Promise<Decision> {
    const startMs = this.#clock.now()
    try {
      if (limiter !== undefined && !charged) {
        await limiter.acquire(cost, { maxWaitMs: this.#maxDelayMs })
        charged = true
      }
      if (resource !== undefined) {
        const leftMs = Math.max(0, this.#maxDelayMs - (this.#clock.now() - startMs))
        await resource.acquire(cost, { maxWaitMs: leftMs })
      }
      return this.#allowed(req, key, limiter, resource, cost, first)
    } catch {
      if (charged && limiter?.refund !== undefined) {
        limiter.refund(cost)
        charged = false
      }
      return this.#refused(req, key, limiter, resource, cost, charged)
    }
  }

  #allowed(
    req: RequestInfo,
    key: string,
    limiter: Limiter | undefined,
    resource: SharedLimit | undefined,
    cost: number,
    first: boolean,
    tookNow = false,
    remoteRemaining?: number,
  ): Decision {
    this.options.onExceeding?.(req, key)
    // The coordinator's figure counts with `remaining: 'cluster'` only.
    const remote = this.#clusterRemaining ? remoteRemaining : undefined
    return {
      allowed: true,
      statusCode: 200,
      headers: this.#headers(limiter, resource, first, tookNow, false, remote),
      body: undefined,
      charged: this.settles ? limiter : undefined,
      cost,
      key,
      limiter,
      shared: resource,
      remoteRemaining: remote,
      context: undefined,
    }
  }

  #refused(
    req: RequestInfo,
    key: string,
    limiter: Limiter | undefined,
    resource: SharedLimit | undefined,
    cost: number,
    limiterCharged: boolean,
    remoteWaitMs = 0,
  ): Decision {
    // Retry-After: until every limit that refused has room (a limit never able to: its window).
    // A key the coordinator refused: when it said asking again may succeed, else this process's.
    let waitMs = 0
    if (limiter !== undefined && !limiterCharged) waitMs = limiter.msUntil(cost)
    if (resource !== undefined)
      waitMs = Math.max(
        waitMs,
        remoteWaitMs > 0 && Number.isFinite(remoteWaitMs) ? remoteWaitMs : resource.msUntil(cost),
      )
    if (!Number.isFinite(waitMs)) waitMs = this.#windowMs(limiter)
    const blockMs = this.options.blockMs
    if (blockMs > 0) {
      // Blocked until the limit has room again, and at least blockMs: a block never ends
      // before the window that refused (a client obeying Retry-After is not refused again).
      waitMs = Math.max(waitMs, blockMs)
      this.#block(key, waitMs)
    }
    // A refusal states the policy whatever the header set: the client needs it now.
    const headers = this.#headers(limiter, resource, false, false, true)
    // Which limit said no: the local per-key one (by its policy's name) or the shared one.
    const limit =
      limiter !== undefined && !limiterCharged
        ? this.#policyName
        : (resource?.id ?? this.#policyName)
    return this.#refusal(req, key, headers, waitMs, false, limit, limiter, resource)
  }

  /** A request without a key, `missingKey` unset or `refuse`: 400, said once to the operator. */
  #noKey(): Decision {
    const source = this.options.key
    const what =
      typeof source === 'object'
        ? `no ${source.header} header`
        : typeof source === 'function'
          ? 'the key function gave no key'
          : `no ${source}`
    if (!this.#warnedNoKey && this.#missingKeyDefaulted) {
      this.#warnedNoKey = true
      process.emitWarning(
        `rate limit: a request had ${what}: refused with 400 (missingKey: 'refuse', the default; 'skip' lets it through, { key } counts it in one shared bucket)`,
        { code: 'SLUICE_ERR_HTTP_NO_KEY' },
      )
    }
    return {
      allowed: false,
      statusCode: 400,
      headers: {},
      body: {
        error: {
          code: 'SLUICE_ERR_HTTP_NO_KEY',
          message: formatError('SLUICE_ERR_HTTP_NO_KEY', what),
          retryable: false,
        },
      },
      charged: undefined,
      cost: 0,
      key: '',
      limiter: undefined,
      shared: undefined,
      remoteRemaining: undefined,
      context: undefined,
    }
  }

  /** A request whose key a keyed family cannot hold: 400, with the coded reason. */
  #badKey(key: unknown, problem: string): Decision {
    return {
      allowed: false,
      statusCode: 400,
      headers: {},
      body: {
        error: {
          code: 'SLUICE_ERR_KEY_INVALID',
          message: formatError('SLUICE_ERR_KEY_INVALID', problem),
          retryable: false,
        },
      },
      charged: undefined,
      cost: 0,
      key: typeof key === 'string' ? key : '',
      limiter: undefined,
      shared: undefined,
      remoteRemaining: undefined,
      context: undefined,
    }
  }

  #blockedAnswer(req: RequestInfo, key: string, waitMs: number): Decision {
    const headers: Record<string, string> = {}
    // A refusal states the policy, blocked or not (and X-RateLimit-Limit with the legacy set).
    const limiter = this.#keyed?.get(key)
    const resource = limiter === undefined ? this.#resourceOf(key, req) : undefined
    const name = limiter !== undefined ? this.#policyName : (resource?.id ?? this.#policyName)
    const policy =
      limiter !== undefined
        ? this.#policyOf(limiter)
        : resource === undefined
          ? undefined
          : derivePolicy(resource.describe())
    limitHeaders(
      [{ name, policy, remaining: 0, resetSec: waitMs / 1000 }],
      this.#headerSet,
      headers,
    )
    return this.#refusal(req, key, headers, waitMs, true, name, limiter, resource)
  }

  #refusal(
    req: RequestInfo,
    key: string,
    headers: Record<string, string>,
    waitMs: number,
    blocked: boolean,
    limit: string,
    limiter: Limiter | undefined,
    resource: SharedLimit | undefined,
  ): Decision {
    const retryAfterSec = retryAfterSeconds(waitMs)
    headers['retry-after'] = String(retryAfterSec)
    const context: LimitContext = {
      key,
      statusCode: this.#statusCode,
      retryAfterSec,
      blocked,
      limit,
    }
    this.options.onLimited?.(req, context)
    const body =
      this.options.errorResponse !== undefined
        ? this.options.errorResponse(req, context)
        : this.options.message !== undefined
          ? this.options.message
          : {
              error: {
                code: 'SLUICE_ERR_HTTP_RATE_LIMITED',
                message: blocked
                  ? `${errorCatalogue.SLUICE_ERR_HTTP_RATE_LIMITED.message}: blocked for ${retryAfterSec} s`
                  : errorCatalogue.SLUICE_ERR_HTTP_RATE_LIMITED.message,
                retryable: true,
                limit,
              },
            }
    return {
      allowed: false,
      statusCode: this.#statusCode,
      headers,
      body,
      charged: undefined,
      cost: 0,
      key,
      limiter,
      shared: resource,
      remoteRemaining: undefined,
      context,
    }
  }

  #block(key: string, blockMs: number): void {
    this.#blocked.delete(key)
    this.#blocked.set(key, this.#clock.now() + blockMs)
    // Bounded like the limiters: the oldest block goes first.
    if (this.#blocked.size > this.#maxKeys) {
      const oldest = this.#blocked.keys().next().value
      if (oldest !== undefined) this.#blocked.delete(oldest)
    }
  }

  /**
   * `first`: the request is its key's first (its limiter was just made).
   * `took`: the limiter has just taken this request's cost (its last reading
   * is now). `refusal`: the policy goes in whatever the header set.
   */
  #headers(
    limiter: Limiter | undefined,
    resource: SharedLimit | undefined,
    first: boolean,
    took = false,
    refusal = false,
    remoteRemaining?: number,
  ): Record<string, string> {
    const headers: Record<string, string> = {}
    if (this.#headerSet === 'none') return headers
    if (resource === undefined && limiter !== undefined && this.#ietfOnly) {
      // The common case, one local limiter: its policy field is made once (per limiter, or once
      // for a stated policy), the start of the RateLimit field once; only r and t per response.
      if (this.#policyAlways || refusal || first) {
        const policy = this.#policyTextOf(limiter)
        if (policy !== undefined) headers['ratelimit-policy'] = policy
      }
      const state = this.#stateOf(limiter, took)
      const r = state.remaining > 0 ? Math.floor(state.remaining) : 0
      const t = state.resetSec > 0 ? Math.ceil(state.resetSec) : 0
      if (r !== this.#lastRemaining || t !== this.#lastResetSec) {
        this.#lastRateLimit = `${this.#rateLimitPrefix}${r};t=${t}`
        this.#lastRemaining = r
        this.#lastResetSec = t
      }
      headers.ratelimit = this.#lastRateLimit
      return headers
    }
    // A key's limiter is new when its key is; a shared resource is stated once.
    const withPolicy =
      this.#policyAlways || refusal || (limiter !== undefined ? first : this.#firstFor(resource))
    const states: LimitState[] = []
    if (limiter !== undefined)
      states.push({
        name: this.#policyName,
        policy: withPolicy ? this.#policyOf(limiter) : undefined,
        ...this.#stateOf(limiter, took),
      })
    if (resource !== undefined) {
      states.push({
        name: resource.id,
        policy: withPolicy ? derivePolicy(resource.describe()) : undefined,
        remaining: remoteRemaining ?? this.#remainingOf(resource),
        resetSec: resource.msUntilReset() / 1000,
      })
    }
    limitHeaders(states, this.#headerSet, headers)
    return headers
  }

  /** What a shared limit has left: a keyed family's key's across the cluster (`remaining` option). */
  #remainingOf(resource: SharedLimit): number {
    return this.#clusterRemaining && resource.clusterRemaining !== undefined
      ? resource.clusterRemaining()
      : resource.remaining()
  }

  /** Whether no response has yet stated this limit's policy (a key's first response), marking it stated. */
  #firstFor(limit: object | undefined): boolean {
    if (limit === undefined || this.#stated.has(limit)) return false
    this.#stated.add(limit)
    return true
  }

  /** What remains and seconds to the reset; `took`: as the take just left them, no clock read. */
  #stateOf(limiter: Limiter, took: boolean): { remaining: number; resetSec: number } {
    if (
      took &&
      limiter.remainingAtLastReading !== undefined &&
      limiter.msUntilResetAtLastReading !== undefined
    )
      return {
        remaining: limiter.remainingAtLastReading(),
        resetSec: limiter.msUntilResetAtLastReading() / 1000,
      }
    return {
      remaining:
        limiter.remaining !== undefined ? limiter.remaining() : limiter.msUntil(1) === 0 ? 1 : 0,
      resetSec: (limiter.msUntilReset?.() ?? limiter.msUntil(1)) / 1000,
    }
  }

  /** A limiter's RateLimit-Policy field: the stated policy's, else its own, made once. */
  #policyTextOf(limiter: Limiter): string | undefined {
    if (this.#statedPolicyText !== undefined) return this.#statedPolicyText
    let text = this.#policyTexts.get(limiter)
    if (text === undefined) {
      const policy = this.#policyOf(limiter)
      text = policy === undefined ? null : policyHeader({ ...policy, name: this.#policyName })
      this.#policyTexts.set(limiter, text)
    }
    return text ?? undefined
  }

  #policyOf(limiter: Limiter): RateLimitPolicy | undefined {
    let policy = this.#policies.get(limiter)
    if (policy === undefined) {
      const shape = limiter.describe?.()
      policy = this.options.policy ?? (shape === undefined ? null : derivePolicy(shape))
      this.#policies.set(limiter, policy)
    }
    return policy ?? undefined
  }

  #windowMs(limiter: Limiter | undefined): number {
    const policy = limiter === undefined ? undefined : this.#policyOf(limiter)
    return (policy?.windowSec ?? 1) * 1000
  }

  #resourceOf(key: string, req: RequestInfo): SharedLimit | undefined {
    if (this.#family !== undefined) return this.#family.view(key)
    const r = this.#resource
    return typeof r === 'function' ? r(key, req) : r
  }
}
