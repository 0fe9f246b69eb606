/**
 * The IETF RateLimit header fields (draft-ietf-httpapi-ratelimit-headers),
 * as structured fields: `RateLimit-Policy: "name";q=100;w=60` says the quota
 * (`q` units per `w` seconds); `RateLimit: "name";r=42;t=3` says what
 * remains (`r`) and the seconds until more is available (`t`).
 */
export interface RateLimitPolicy {
  /** Policy name, a structured-field string; default "default". */
  readonly name?: string | undefined
  /** Units allowed per window. */
  readonly quota: number
  /** Window, seconds. */
  readonly windowSec: number
}

function sfString(value: string): string {
  return `"${value.replace(/[\\"]/g, '\\$&')}"`
}

export function policyHeader(policy: RateLimitPolicy): string {
  return `${sfString(policy.name ?? 'default')};q=${Math.floor(policy.quota)};w=${Math.ceil(policy.windowSec)}`
}

/** The start of a RateLimit field, up to its `r` value: made once per policy name. */
export function rateLimitPrefix(name: string): string {
  return `${sfString(name)};r=`
}

export function rateLimitHeader(
  policy: RateLimitPolicy,
  remaining: number,
  resetSec: number,
): string {
  return `${rateLimitPrefix(policy.name ?? 'default')}${Math.max(0, Math.floor(remaining))};t=${Math.max(0, Math.ceil(resetSec))}`
}

/** Retry-After in whole seconds (at least 1: "0" would invite an immediate retry). */
export function retryAfterSeconds(waitMs: number): number {
  return Math.max(1, Math.ceil(waitMs / 1000))
}

/** One limit's state for the header fields: its policy (when known), what remains, seconds to its reset. */
export interface LimitState {
  readonly name: string
  readonly policy: RateLimitPolicy | undefined
  readonly remaining: number
  readonly resetSec: number
}

/**
 * The header fields of one response. `ietf`: RateLimit-Policy and RateLimit,
 * one list member per limit (a request under a per-IP limit and a shared
 * one sees both); `ietf-lean` the same (the caller leaves out the policies
 * where it sends none). `legacy`: X-RateLimit-Limit, -Remaining and -Reset (seconds)
 * of the tightest limit, as @fastify/rate-limit and express-rate-limit send.
 */
export function limitHeaders(
  states: readonly LimitState[],
  set: 'ietf' | 'ietf-lean' | 'legacy' | 'both' | 'none' | 'draft-6' | 'draft-7',
  out: Record<string, string>,
): void {
  if (set === 'none' || states.length === 0) return
  if (set === 'draft-6' || set === 'draft-7') {
    draftHeaders(tightestOf(states), set, out)
    return
  }
  if (set !== 'legacy') {
    let policies = ''
    let limits = ''
    for (const s of states) {
      if (s.policy !== undefined)
        policies += (policies === '' ? '' : ', ') + policyHeader({ ...s.policy, name: s.name })
      limits +=
        (limits === '' ? '' : ', ') +
        rateLimitHeader({ name: s.name, quota: 0, windowSec: 1 }, s.remaining, s.resetSec)
    }
    if (policies !== '') out['ratelimit-policy'] = policies
    out.ratelimit = limits
  }
  if (set === 'legacy' || set === 'both') {
    const tightest = tightestOf(states)
    if (tightest.policy !== undefined)
      out['x-ratelimit-limit'] = String(Math.floor(tightest.policy.quota))
    out['x-ratelimit-remaining'] = String(Math.max(0, Math.floor(tightest.remaining)))
    out['x-ratelimit-reset'] = String(Math.max(0, Math.ceil(tightest.resetSec)))
  }
}

/** The limit with the least remaining: the one a single set of fields describes. */
function tightestOf(states: readonly LimitState[]): LimitState {
  let tightest = states[0]!
  for (const s of states) if (s.remaining < tightest.remaining) tightest = s
  return tightest
}

/**
 * The earlier drafts' fields, as express-rate-limit sends them for `standardHeaders`:
 * `draft-6`: RateLimit-Policy `100;w=60`, RateLimit-Limit, RateLimit-Remaining and
 * RateLimit-Reset (seconds); `draft-7`: RateLimit-Policy and one RateLimit field
 * `limit=100, remaining=99, reset=59`. One limit: the tightest.
 */
function draftHeaders(
  s: LimitState,
  set: 'draft-6' | 'draft-7',
  out: Record<string, string>,
): void {
  const remaining = Math.max(0, Math.floor(s.remaining))
  const reset = Math.max(0, Math.ceil(s.resetSec))
  const quota = s.policy === undefined ? undefined : Math.floor(s.policy.quota)
  if (s.policy !== undefined)
    out['ratelimit-policy'] = `${quota};w=${Math.ceil(s.policy.windowSec)}`
  if (set === 'draft-6') {
    if (quota !== undefined) out['ratelimit-limit'] = String(quota)
    out['ratelimit-remaining'] = String(remaining)
    out['ratelimit-reset'] = String(reset)
  } else
    out.ratelimit =
      quota === undefined
        ? `remaining=${remaining}, reset=${reset}`
        : `limit=${quota}, remaining=${remaining}, reset=${reset}`
}
