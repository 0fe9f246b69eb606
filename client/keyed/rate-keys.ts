import type { KeyKind } from './key-kind.js'
import type { KeyState } from './key-state.js'
import {
  limitLeaseOf,
  limitLeasedEntry,
  limitWantsOwnLease,
  newLimitState,
  refreshLimit,
} from './limit-keys.js'
import type { FamilyShares } from './shares.js'

/** Refresh periods a key's bucket must last at its asking before it asks for a lease of its own. */
const dryHorizonPeriods = 3

/** Whether `state`'s bucket runs dry within a few refresh periods, asked `wants`/s with `capacity`/s coming in. */
function runsDryWithin(
  state: KeyState,
  wants: number,
  capacity: number,
  shares: FamilyShares,
): boolean {
  const horizonSec = (dryHorizonPeriods * shares.refreshMs) / 1000
  return state.bucket.tokens <= (wants - capacity) * horizonSec
}

/** A rate family's key: a token bucket at the key's capacity in force (its lease's, or the share's). */
export const rateKeys: KeyKind = Object.freeze<KeyKind>({
  refills: true,
  asksWhenSpent: false,
  newState: newLimitState,
  refresh: refreshLimit,
  take: (_shares, state, cost) => state.bucket.tryTake(cost),
  lapsed: () => false,
  msUntil: (_shares, state, cost) => state.bucket.msUntil(cost),
  remaining: (_shares, state) => Math.floor(state.bucket.tokens),
  // What a first check would find: the bucket `newState` makes (a view, not the hot path; one
  // rule for a new key's tokens, not a second formula of it).
  untracked: (shares, key) => newLimitState(shares, key).bucket.tokens,
  elsewhere: () => undefined,
  msUntilFull: (_shares, state) => (state === undefined ? 0 : state.bucket.msUntilFull()),
  leaseOf: limitLeaseOf,
  evictable: (_shares, state) =>
    state.lease === undefined && state.waiters === undefined && state.bucket.msUntilFull() === 0,
  fits: () => true,
  wants: (state, elapsedSec, waiting) => (state.asked + waiting) / elapsedSec,
  leasedEntry: (_shares, state, id, wants, lately) => limitLeasedEntry(state, id, wants, lately),
  // Asking past the share is not enough while the bucket holds what the asking needs until a
  // lease could come: a key below its limit overall asks in bursts past a share's rate, and a
  // key leased on its own starts from what its bucket held, so every needless move lost the
  // burst ("100 per minute": keys asked a few times a minute went hot and back, docs/keys.md).
  wantsOwnLease: (shares, state, key, wants, refused) =>
    refused > 0 ||
    (limitWantsOwnLease(shares, key, wants, 0) &&
      runsDryWithin(state, wants, limitLeaseOf(shares, key, undefined).capacity, shares)),
  candidateEntry: (_shares, _state, id, wants) => ({ resource: id, wants }),
})
