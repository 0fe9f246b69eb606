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

export function rateLimitHeader(
  policy: RateLimitPolicy,
  remaining: number,
  resetSec: number,
): string {
  return `${sfString(policy.name ?? 'default')};r=${Math.max(0, Math.floor(remaining))};t=${Math.max(0, Math.ceil(resetSec))}`
}

/** Retry-After in whole seconds (at least 1: "0" would invite an immediate retry). */
export function retryAfterSeconds(waitMs: number): number {
  return Math.max(1, Math.ceil(waitMs / 1000))
}
