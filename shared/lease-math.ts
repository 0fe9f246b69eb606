import { inKindUnits, type ResourceKind } from './domain.js'

/**
 * The lease arithmetic both sides of the wire must compute alike: the
 * coordinator counts what a client may enforce by these rules, and the
 * client enforces by them. A drift between the two would break Σ ≤ capacity
 * silently, so each rule is written once, here, and imported by the pool,
 * the client and the model tests.
 */

/**
 * What a lease lets its client fall back to once it lapses unrenewed, in
 * `safe` mode: its safe capacity, never above the lease, never below 0.
 */
export function safeFallback(lease: {
  readonly capacity: number
  readonly safeCapacity: number
}): number {
  return Math.max(0, Math.min(lease.safeCapacity, lease.capacity))
}

/** A fallback's burst (rate): the lease's burst, scaled as the fallback is to the lease. */
export function fallbackBurst(
  lease: { readonly capacity: number; readonly burst: number },
  fallback: number,
): number {
  return lease.capacity > 0 ? (lease.burst * fallback) / lease.capacity : 0
}

/**
 * A keyed family is crowded once a default share is below this (a key's burst split over more
 * than five processes): a process's `decide` then asks the coordinator what its part refuses,
 * and a process that decides so holds no default share once the coordinator's own part holds
 * one for it (server/pool/shapes/default-holders.ts). One figure both sides.
 */
export const crowdedShare = 0.2

/** A key's limits: how fast it earns, and how much it holds. */
interface Limits {
  readonly capacity: number
  readonly burst: number
}

/** How long `l` takes to refill its burst at its capacity, ms (capacity 0 with a burst: never). */
function refillMsOf(l: Limits): number {
  return l.capacity > 0 ? (l.burst / l.capacity) * 1000 : l.burst > 0 ? Infinity : 0
}

/**
 * How long a keyed family's slowest key takes to refill its burst at its capacity, ms (the
 * plan's keys included; a key of capacity 0 with a burst: never). The coordinator waits this
 * long quiet before a family's first share may start full, and a client's share earns a new
 * key's burst over it: the same figure both sides.
 */
export function slowestRefillMs(family: Limits, plan: Readonly<Record<string, Limits>>): number {
  let most = refillMsOf(family)
  for (const l of Object.values(plan)) most = Math.max(most, refillMsOf(l))
  return most
}

/**
 * How long a keyed family's fastest key takes to refill its burst at its capacity, ms (the
 * plan's keys included): what goes at a share of every key's rate goes at least at this pace
 * (a fall's gift: server/pool/fall-gifts.ts).
 */
export function fastestRefillMs(family: Limits, plan: Readonly<Record<string, Limits>>): number {
  let least = refillMsOf(family)
  for (const l of Object.values(plan)) least = Math.min(least, refillMsOf(l))
  return least
}

/** A key's limits: the plan's entry for it, else the family's. */
export function keyLimits<T>(plan: Readonly<Record<string, T>>, key: string, family: T): T {
  return (Object.hasOwn(plan, key) ? plan[key] : undefined) ?? family
}

/**
 * A share (a fraction, a family lease's capacity) of a key's `limit` in the
 * kind's units: whole slots for a whole-unit kind. What a holder's default
 * share of a key is, where the client enforces it and where the coordinator
 * seeds a key that goes hot.
 */
export function shareOfKey(kind: ResourceKind, share: number, limit: number): number {
  return inKindUnits(kind, share * limit)
}

/**
 * How far ahead a quota looks: a block is sized for what a client asks over
 * two refresh periods (so a steady client renews about once a period), and
 * a client reports a key of its default share once it would spend what is
 * left of it within as long.
 */
export function quotaHorizonMs(refreshMs: number): number {
  return 2 * refreshMs
}
