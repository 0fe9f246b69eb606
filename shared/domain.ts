/**
 * The domain's vocabulary, in one place: what a resource can be, what a
 * client does without a lease, the bounds every number on the wire and in
 * config is held to, and the defaults that are worked out from other
 * settings. The protocol, the config schema, the allocation engine's checks,
 * the client and the simulator all derive theirs from here.
 */

/**
 * `rate`: tokens per second, enforced by a token bucket. `concurrency`: slots in flight, by a
 * semaphore. `quota`: units per window (a day's budget), leased in blocks and spent locally.
 */
export const resourceKinds = ['rate', 'concurrency', 'quota'] as const
export type ResourceKind = (typeof resourceKinds)[number]

/**
 * How the coordinator turns a client's recent reports into the demand of a
 * round: `fast` follows a rise at once and a drop after `window` lower
 * reports, `max` the largest of the window, `ewma` a moving average.
 */
export const demandEstimators = ['fast', 'max', 'ewma'] as const
export type DemandEstimator = (typeof demandEstimators)[number]

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
/**
 * How far a client's clock and the coordinator's may run apart (0.1%: a thousand ppm, twenty
 * times what NTP lets a clock run off), over any time. What either side places on its own clock
 * from the other's times is moved this much the safe way.
 */
export const clockDriftShare = 0.001

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
  /**
   * Most keys a released keyed quota share says it spent of (and a lease hands on): a process
   * that spent of more keys in the window keeps its share spent instead (docs/quotas.md).
   */
  maxSpentKeys: 4096,
})

/** Clamps a measured quantity into [0, maxQuantity] (NaN counts as 0). */
export function clampQuantity(value: number): number {
  return value > 0 ? Math.min(domainLimits.maxQuantity, value) : 0
}

/** Clamps a weight into [minWeight, maxWeight]. */
export function clampWeight(value: number): number {
  return Math.min(domainLimits.maxWeight, Math.max(domainLimits.minWeight, value))
}

/**
 * What each kind is, in numbers: whether its capacity comes in whole units
 * (a semaphore cannot use half a slot) and whether it refills with time (a
 * bucket does; slots come back on release). Code that must treat the kinds
 * differently asks here, so a new kind is one row.
 */
export interface KindTraits {
  /** Capacity comes in whole units (a semaphore cannot use half a slot). */
  readonly wholeUnits: boolean
  /** Capacity comes back with time (a bucket refills); else on release (slots). */
  readonly refills: boolean
  /** What is in use is held until released, so a connected client's lease never lapses. */
  readonly holdsInFlight: boolean
  /** A budget per window: what is spent stays spent until the window ends (a quota). */
  readonly perWindow: boolean
  /** The unit as operators read it after a number: `/s` or ` slots`. */
  readonly unitSuffix: string
  /** A short label for tables. */
  readonly label: string
}

export const kindTraits: Readonly<Record<ResourceKind, KindTraits>> = Object.freeze({
  rate: Object.freeze({
    wholeUnits: false,
    refills: true,
    holdsInFlight: false,
    perWindow: false,
    unitSuffix: '/s',
    label: 'rate',
  }),
  concurrency: Object.freeze({
    wholeUnits: true,
    refills: false,
    holdsInFlight: true,
    perWindow: false,
    unitSuffix: ' slots',
    label: 'slots',
  }),
  quota: Object.freeze({
    wholeUnits: true,
    refills: false,
    holdsInFlight: false,
    perWindow: true,
    unitSuffix: ' a window',
    label: 'quota',
  }),
})

/** Whole slots in `value`, a hair of float error forgiven (2.9999999999 slots are 3). */
export function wholeSlots(value: number): number {
  return Math.floor(value + 1e-9)
}

/** `value` in the kind's units: whole slots for a whole-unit kind, as it is otherwise. */
export function inKindUnits(kind: ResourceKind, value: number): number {
  return kindTraits[kind].wholeUnits ? wholeSlots(value) : value
}

/** A rate resource bursts one second of its capacity unless told otherwise; slots have no burst beyond capacity. */
export function defaultBurst(kind: ResourceKind, capacity: number, burst?: number): number {
  return kindTraits[kind].refills ? (burst ?? capacity) : capacity
}

/**
 * How long a silent client may still enforce something an earlier
 * coordinator granted: its lease (ttl, plus grace for the delay on the way)
 * and then its safe fallback for the safe hold.
 */
export function commitmentLifeMs(t: {
  readonly leaseTtlMs: number
  readonly graceMs: number
  readonly safeHoldMs?: number | undefined
}): number {
  return t.leaseTtlMs + t.graceMs + safeHoldMsOf(t)
}

/**
 * How long a coordinator that has just started re-learns what clients hold
 * before granting anything new: unless set, the whole life of a commitment,
 * so everything an earlier coordinator sent has lapsed or been reported.
 */
export function defaultLearningMs(t: {
  readonly leaseTtlMs: number
  readonly graceMs: number
  readonly safeHoldMs?: number | undefined
  readonly learningMs?: number | undefined
}): number {
  return t.learningMs ?? commitmentLifeMs(t)
}

/** The safe hold: as set, else half a lease life (docs/operations.md gives the trade-off, measured). */
export function safeHoldMsOf(t: {
  readonly leaseTtlMs: number
  readonly safeHoldMs?: number | undefined
}): number {
  return t.safeHoldMs ?? Math.round(t.leaseTtlMs / 2)
}
