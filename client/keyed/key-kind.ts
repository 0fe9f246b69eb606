import type { KeyState } from './key-state.js'
import type { FamilyShares } from './shares.js'
import type { KeyLease, KeyReport } from './types.js'

/**
 * How a key of one kind is enforced in this process: a token bucket (rate),
 * slots in flight (concurrency), or a window's budget spent (quota). The
 * family (family.ts) holds the keys and the leases; it asks the key kind in
 * force, and never compares a kind. A new kind of key is a file here and a
 * row in `keyKinds` (index.ts of this folder: keyKindOf).
 */
export interface KeyKind {
  /** Whether a key's capacity comes back with time (a bucket refills): a wake timer helps a waiter. */
  readonly refills: boolean
  /**
   * Whether a key's part here is a budget spent per window (a quota): spent, the rest of the
   * key's budget may sit at another process or the coordinator, so a check that may wait a
   * round trip asks there (once a refresh period at most while refused there too).
   */
  readonly asksWhenSpent: boolean
  /** A key seen for the first time here, on the default share. */
  newState(shares: FamilyShares, key: string): KeyState
  /** Sets what the key may use now (its own lease, its fallback, or the default share). */
  refresh(shares: FamilyShares, state: KeyState): void
  /** Admits `cost` if what the key may use now allows (the state refreshed). */
  take(shares: FamilyShares, state: KeyState, cost: number): boolean
  /**
   * Whether a refusal of the key now is time's, not its budget's: what it may use ran out with
   * its lease's life (a quota's window's edge, its next window's lease to come by itself). Such
   * a refusal is no demand: it neither asks an early report nor a lease of the key's own.
   */
  lapsed(shares: FamilyShares, state: KeyState): boolean
  /** Milliseconds until `cost` would be admitted (Infinity: not by waiting). */
  msUntil(shares: FamilyShares, state: KeyState, cost: number): number
  /** Whole tokens, slots or units available now. */
  remaining(shares: FamilyShares, state: KeyState): number
  /**
   * What a key not seen here yet would have available now, as `newState` would start it: a
   * bucket what a new key's starts with (a first share may start with part of its burst), slots
   * or a quota's units the share's whole.
   */
  untracked(shares: FamilyShares, key: string): number
  /**
   * What the key's last lease said it had left at the other processes (a keyed quota's key
   * leased on its own: `elsewhere`), undefined where no lease says it.
   */
  elsewhere(shares: FamilyShares, state: KeyState): number | undefined
  /** Milliseconds until the key is whole again here (a bucket full, a quota's window over). */
  msUntilFull(shares: FamilyShares, state: KeyState | undefined): number
  /** What this process may use of `key` now, and where that comes from. */
  leaseOf(shares: FamilyShares, key: string, state: KeyState | undefined): KeyLease
  /** Whether the key may be forgotten now (nothing of it would be lost). */
  evictable(shares: FamilyShares, state: KeyState): boolean
  /** Whether what is in use (or spent) of the key fits what it may use: an ack may go. */
  fits(state: KeyState): boolean
  /** Demand this period: asked per second, or slots wanted at once (waiting callers included). */
  wants(state: KeyState, elapsedSec: number, waiting: number): number
  /**
   * The report entry of a key leased on its own (undefined: not reported this time), when its
   * own lease rules it; `leased` false when the key is on the default share here (always so
   * for a key with no lease: the family does not ask then).
   */
  leasedEntry(
    shares: FamilyShares,
    state: KeyState,
    id: string,
    wants: number,
    lately: boolean,
  ): { leased: boolean; entry?: KeyReport | undefined }
  /** Whether a key on the default share asks to be leased on its own. */
  wantsOwnLease(
    shares: FamilyShares,
    state: KeyState,
    key: string,
    wants: number,
    refused: number,
  ): boolean
  /** The report entry of a key asking to be leased on its own. */
  candidateEntry(shares: FamilyShares, state: KeyState, id: string, wants: number): KeyReport
}
