import type { KeyKind } from './key-kind.js'
import {
  limitLeaseOf,
  limitLeasedEntry,
  limitWantsOwnLease,
  newLimitState,
  refreshLimit,
} from './limit-keys.js'

/** A rate family's key: a token bucket at the key's capacity in force (its lease's, or the share's). */
export const rateKeys: KeyKind = Object.freeze<KeyKind>({
  refills: true,
  newState: newLimitState,
  refresh: refreshLimit,
  take: (_shares, state, cost) => state.bucket.tryTake(cost),
  msUntil: (_shares, state, cost) => state.bucket.msUntil(cost),
  remaining: (_shares, state) => Math.floor(state.bucket.tokens),
  msUntilFull: (_shares, state) => (state === undefined ? 0 : state.bucket.msUntilFull()),
  leaseOf: limitLeaseOf,
  evictable: (_shares, state) =>
    state.lease === undefined && state.waiters === undefined && state.bucket.msUntilFull() === 0,
  fits: () => true,
  wants: (state, elapsedSec, waiting) => (state.asked + waiting) / elapsedSec,
  leasedEntry: (_shares, state, id, wants, lately) => limitLeasedEntry(state, id, wants, lately),
  wantsOwnLease: (shares, _state, key, wants, refused) =>
    limitWantsOwnLease(shares, key, wants, refused),
  candidateEntry: (_shares, _state, id, wants) => ({ resource: id, wants }),
})
