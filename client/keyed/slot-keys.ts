import type { KeyKind } from './key-kind.js'
import {
  limitLeaseOf,
  limitLeasedEntry,
  limitWantsOwnLease,
  newLimitState,
  refreshLimit,
} from './limit-keys.js'

/** A concurrency family's key: whole slots in flight, at most the key's slots in force. */
export const slotKeys: KeyKind = Object.freeze<KeyKind>({
  refills: false,
  asksWhenSpent: false,
  newState: newLimitState,
  refresh: refreshLimit,
  lapsed: () => false,
  take: (_shares, state, cost) => {
    if (state.inFlight + cost > state.slots) return false
    state.inFlight += cost
    if (state.inFlight > state.peak) state.peak = state.inFlight
    return true
  },
  msUntil: (_shares, state, cost) => (state.inFlight + cost <= state.slots ? 0 : Infinity),
  remaining: (_shares, state) => Math.max(0, state.slots - state.inFlight),
  untracked: (shares, key) => limitLeaseOf(shares, key, undefined).burst,
  elsewhere: () => undefined,
  msUntilFull: () => 0,
  leaseOf: limitLeaseOf,
  evictable: (_shares, state) =>
    state.lease === undefined &&
    state.inFlight === 0 &&
    state.waiters === undefined &&
    state.bucket.msUntilFull() === 0,
  fits: (state) => state.inFlight <= state.slots,
  wants: (state, _elapsedSec, waiting) => Math.max(state.peak, state.inFlight) + waiting,
  leasedEntry: (_shares, state, id, wants, lately) => limitLeasedEntry(state, id, wants, lately),
  wantsOwnLease: (shares, _state, key, wants, refused) =>
    limitWantsOwnLease(shares, key, wants, refused),
  candidateEntry: (_shares, _state, id, wants) => ({ resource: id, wants }),
})
