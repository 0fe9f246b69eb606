import { fallbackBurst, safeFallback, shareOfKey } from '../../shared/index.js'
import { TokenBucket } from '../../shared/limiters/index.js'
import { KeyState } from './key-state.js'
import type { FamilyShares } from './shares.js'
import type { KeyLease, KeyReport } from './types.js'

/**
 * What rate and concurrency keys share: a key's limit is a capacity (a
 * bucket's rate, or slots), its own lease's while in force, then the lease's
 * safe fallback for the hold, then 0; or, on the default share, the share of
 * the key's limits (in whole slots for a semaphore, shared/lease-math.ts).
 */

/** What `key` may use at `nowMs` (now by default), and when that changes by time alone. */
export function limitsNow(
  shares: FamilyShares,
  key: string,
  state: KeyState | undefined,
  nowMs = shares.hotClock.now(),
): { capacity: number; burst: number; changeAtMs: number } {
  const lease = state?.lease
  if (lease !== undefined && state !== undefined) {
    if (nowMs < state.leaseUntilMs)
      return { capacity: lease.capacity, burst: lease.burst, changeAtMs: state.leaseUntilMs }
    if (nowMs < state.fallbackUntilMs) {
      const capacity = safeFallback(lease)
      return { capacity, burst: fallbackBurst(lease, capacity), changeAtMs: state.fallbackUntilMs }
    }
    return { capacity: 0, burst: 0, changeAtMs: Infinity }
  }
  const limits = shares.keyLimits(key)
  return {
    capacity: shareOfKey(shares.kind, shares.share, limits.capacity),
    burst: shareOfKey(shares.kind, shares.share, limits.burst),
    changeAtMs: Infinity,
  }
}

/**
 * A key seen here for the first time: its bucket starts full of what the share held of its
 * burst before its last rise (FamilyShares.baseShare), and the rise is a fresh part holding
 * what it earned since (TokenBucket.moveRate), so its first request is decided here at
 * once and the old part earns up to its old burst only. What is left of a fall's gift to the
 * first share is an excess above it, going (FamilyShares.giftOf).
 */
export function newLimitState(shares: FamilyShares, key: string): KeyState {
  const hotClock = shares.hotClock
  const { capacity, burst } = limitsNow(shares, key, undefined)
  const limits = shares.keyLimits(key)
  const baseBurst = Math.min(burst, shares.baseShare * limits.burst)
  let bucket: TokenBucket
  if (baseBurst >= burst) bucket = new TokenBucket(hotClock, capacity, burst, burst)
  else {
    const baseRate = burst > 0 ? (capacity * baseBurst) / burst : 0
    bucket = new TokenBucket(hotClock, baseRate, baseBurst, baseBurst)
    bucket.moveRate(capacity, burst, Infinity, Math.max(0, hotClock.now() - shares.increasedAtMs))
  }
  // What a fall gave for this process's first share, above the burst, going (shares.ts).
  const [gift, goesPerSec] = shares.giftOf(limits, hotClock.now())
  if (gift > 0) bucket.addExcess(gift, goesPerSec)
  const state = new KeyState(key, bucket)
  state.epoch = shares.epoch
  state.slots = capacity
  state.movedMs = hotClock.now()
  return state
}

/**
 * Sets the key's bucket and slots to what it may use now. The change moves a share of the
 * key between processes (TokenBucket.moveRate): a fall keeps what the slices that fell held,
 * going at the rate that fell; a rise is a fresh part, empty, earning at the rate gained. So
 * across the processes the key's tokens never exceed one bucket of the key, and the burst a
 * move used to drop is spent (docs/keys.md, "A share that moves").
 *
 * A key is refreshed when it is next used, maybe long after what it may use changed. Its
 * bucket is moved as of then: a lease's end and its fallback's at their times; the default
 * share down to the lowest it was since as of its first move, and up to what it is now as of
 * its last (a fall never later, a rise never earlier than it came). Moved now instead, a key
 * idle through a fall would have earned at its old rate and kept its old burst while a
 * riser's fresh part filled: a gateway joining two whose key sat full let the three hold 4/3
 * of a burst (test/client/keyed/limit-keys.test.ts).
 */
export function refreshLimit(shares: FamilyShares, state: KeyState): void {
  const bucket = state.bucket
  let risenForMs = 0
  // epoch < 0: a lease just came, or the key went back to the default split: moved now.
  if (state.epoch >= 0) {
    if (state.lease !== undefined) {
      // Changes by time alone, each at its time: the lease's end, then its fallback's.
      for (let at = state.changeAtMs; at <= shares.hotClock.now(); at = state.changeAtMs) {
        const then = limitsNow(shares, state.key, state, at)
        bucket.moveRate(then.capacity, then.burst, at)
        state.changeAtMs = then.changeAtMs
      }
    } else if (state.epoch !== shares.epoch) {
      const moves = shares.movesSince(state.epoch)
      const limits = shares.keyLimits(state.key)
      if (moves === undefined) {
        // Not remembered: what exceeds the share now goes (no excess kept, no part earned early).
        bucket.setRate(
          shareOfKey(shares.kind, shares.share, limits.capacity),
          shareOfKey(shares.kind, shares.share, limits.burst),
        )
      } else if (moves !== null) {
        const low = moves.lowShare
        bucket.moveRate(
          shareOfKey(shares.kind, low, limits.capacity),
          shareOfKey(shares.kind, low, limits.burst),
          moves.firstAtMs,
        )
        risenForMs = Math.max(0, shares.hotClock.now() - moves.lastAtMs)
      }
    }
  }
  const { capacity, burst, changeAtMs } = limitsNow(shares, state.key, state)
  bucket.moveRate(capacity, burst, Infinity, risenForMs)
  state.slots = capacity
  state.changeAtMs = changeAtMs
  state.epoch = shares.epoch
}

/** What this process may use of `key` now, and where that comes from. */
export function limitLeaseOf(
  shares: FamilyShares,
  key: string,
  state: KeyState | undefined,
): KeyLease {
  if (state !== undefined && state.lease !== undefined) {
    const nowMs = shares.hotClock.now()
    if (nowMs < state.leaseUntilMs)
      return { capacity: state.lease.capacity, burst: state.lease.burst, source: 'key' }
    if (nowMs < state.fallbackUntilMs) {
      const capacity = safeFallback(state.lease)
      return { capacity, burst: fallbackBurst(state.lease, capacity), source: 'fallback' }
    }
    return { capacity: 0, burst: 0, source: 'none' }
  }
  if (shares.share <= 0) return { capacity: 0, burst: 0, source: 'none' }
  const { capacity, burst } = shares.keyLimits(key)
  return {
    capacity: shareOfKey(shares.kind, shares.share, capacity),
    burst: shareOfKey(shares.kind, shares.share, burst),
    source: shares.lease !== undefined ? 'default' : 'fallback',
  }
}

/**
 * A rate or concurrency key leased on its own: reported while asked for here (lately), so it is
 * renewed, grown or shrunk. A key leased without being asked for here (it went hot elsewhere:
 * the lease of 0, or a share seeded from the default) is never reported as this process's
 * demand: what the coordinator leased here unasked goes back, and a key nobody asks for goes
 * cold (docs/keys.md). Seeded here unasked, it is named once, asking for nothing, so that the
 * coordinator need not keep the seed until a refresh period has passed.
 */
export function limitLeasedEntry(
  state: KeyState,
  id: string,
  wants: number,
  lately: boolean,
): { leased: boolean; entry?: KeyReport | undefined } {
  if (state.lease === undefined) return { leased: false }
  // Leased here unasked as the key went hot: named once (the coordinator keeps the seeded
  // lease until it hears), asking for nothing, unless it was asked for since.
  if (state.mustReport) {
    state.mustReport = false
    return {
      leased: true,
      entry: wants > 0 ? { resource: id, wants } : { resource: id, wants, unasked: true },
    }
  }
  return { leased: true, entry: wants > 0 || lately ? { resource: id, wants } : undefined }
}

/** A key on the default share asks to be leased on its own once refused, or asking past its share. */
export function limitWantsOwnLease(
  shares: FamilyShares,
  key: string,
  wants: number,
  refused: number,
): boolean {
  if (refused > 0) return true
  // Not asked this period: past no share (and no lease looked up for it: most keys, each report).
  if (wants <= 0) return false
  return wants > limitLeaseOf(shares, key, undefined).capacity * 1.0001
}
