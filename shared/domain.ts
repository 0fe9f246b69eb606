/**
 * The domain's vocabulary, in one place: what a resource can be, what a
 * client does without a lease, the bounds every number on the wire and in
 * config is held to, and the defaults that are worked out from other
 * settings. The protocol, the config schema, the allocation engine's checks,
 * the client and the simulator all derive theirs from here.
 */

/** `rate`: tokens per second, enforced by a token bucket. `concurrency`: slots in flight, by a semaphore. */
export const resourceKinds = ['rate', 'concurrency'] as const
export type ResourceKind = (typeof resourceKinds)[number]

/**
 * What a client enforces before its first lease and after a lease lapses
 * unrenewed: `safe` the lease's safe capacity, `pessimistic` nothing,
 * `optimistic` its own demand (the one mode that may exceed capacity).
 */
export const failureModes = ['safe', 'pessimistic', 'optimistic'] as const
export type FailureMode = (typeof failureModes)[number]

/**
 * Bounds on every quantity Sluice accepts. They keep every sum and product
 * the allocation engine forms (up to a million claimants × weight × level)
 * far from overflow, so no finite input can produce a NaN or an Infinity.
 */
export const domainLimits = Object.freeze({
  /** Largest capacity, demand, burst or tenant cap, in the resource's unit. */
  maxQuantity: 1e15,
  /** Smallest client or tenant weight. */
  minWeight: 1e-6,
  /** Largest client or tenant weight. */
  maxWeight: 1e6,
  /** Largest |priority|; priorities are integers. */
  maxPriority: 1_000_000,
  /** Longest resource id, client id of an allocation, or tenant name, in UTF-16 code units. */
  maxIdLength: 1024,
  /** Longest client id on the wire. */
  maxClientIdLength: 256,
  /** Longest tenant token on the wire. */
  maxTokenLength: 4096,
  /** Most entries in one message (holdings, demand reports, releases). */
  maxEntries: 10_000,
})

/** Clamps a measured quantity into [0, maxQuantity] (NaN counts as 0). */
export function clampQuantity(value: number): number {
  return value > 0 ? Math.min(domainLimits.maxQuantity, value) : 0
}

/** Clamps a weight into [minWeight, maxWeight]. */
export function clampWeight(value: number): number {
  return Math.min(domainLimits.maxWeight, Math.max(domainLimits.minWeight, value))
}

/** A rate resource bursts one second of its capacity unless told otherwise; slots have no burst beyond capacity. */
export function defaultBurst(kind: ResourceKind, capacity: number, burst?: number): number {
  return kind === 'rate' ? (burst ?? capacity) : capacity
}

/**
 * How long a silent client may still enforce something an earlier
 * coordinator granted: its lease (ttl, plus grace for the delay on the way)
 * and then its safe fallback for the safe hold.
 */
export function commitmentLifeMs(t: {
  readonly leaseTtlMs: number
  readonly graceMs: number
  readonly safeHoldMs: number
}): number {
  return t.leaseTtlMs + t.graceMs + t.safeHoldMs
}

/**
 * How long a coordinator that has just started re-learns what clients hold
 * before granting anything new: unless set, the whole life of a commitment,
 * so everything an earlier coordinator sent has lapsed or been reported.
 */
export function defaultLearningMs(t: {
  readonly leaseTtlMs: number
  readonly graceMs: number
  readonly safeHoldMs: number
  readonly learningMs?: number | undefined
}): number {
  return t.learningMs ?? commitmentLifeMs(t)
}

/** The safe hold unless set: half a lease life (docs/operations.md gives the trade-off, measured). */
export function defaultSafeHoldMs(leaseTtlMs: number): number {
  return Math.round(leaseTtlMs / 2)
}
