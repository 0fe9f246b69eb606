import { quotaHorizonMs, shareOfKey } from '../../shared/index.js'
import { TokenBucket } from '../../shared/limiters/index.js'
import type { KeyKind } from './key-kind.js'
import type { KeyReport } from './types.js'
import { KeyState } from './key-state.js'
import type { FamilyShares } from './shares.js'

/**
 * A keyed quota's key: a budget per window, spent, never refilled before
 * the next window. Its budget is its own lease's when that is of the family
 * lease's window (or newer: the pool leases a key of a new window with the
 * family's first lease of it, or before), else the default share of the
 * family lease's window. A key leased on its own in a window never takes the
 * default share of that window.
 */

/**
 * Whether the key's own lease rules it (it is of the family lease's window, or newer; or its
 * block of the next window sent ahead is).
 */
export function keyLeaseRules(shares: FamilyShares, state: KeyState): boolean {
  const w = state.lease?.window
  if (w === undefined) return false
  return !((w.next?.index ?? w.index) < shares.windowIndex)
}

/** When the key's own lease came (hot clock): its times are from then. */
function leaseAtMs(state: KeyState): number {
  return state.leaseUntilMs - (state.lease?.ttlMs ?? 0)
}

/**
 * A keyed quota's budget of `key` now: its number, its window, when spending it ends, and when
 * the next window's part sent ahead starts (Infinity: none).
 */
function quotaNow(
  shares: FamilyShares,
  key: string,
  state: KeyState | undefined,
): { capacity: number; window: number; endAtMs: number; nextAtMs: number } {
  const w = state?.lease?.window
  if (w !== undefined && keyLeaseRules(shares, state!)) {
    const atMs = leaseAtMs(state!)
    const next = w.next
    // Its block of the next window sent ahead (server/pool/ahead.ts): in force from its start.
    if (next !== undefined && shares.hotClock.now() >= atMs + next.startsInMs)
      return {
        capacity: next.capacity,
        window: next.index,
        endAtMs: atMs + next.endsInMs,
        nextAtMs: Infinity,
      }
    return {
      capacity: state!.lease!.capacity,
      window: w.index,
      endAtMs: next === undefined ? state!.leaseUntilMs : atMs + w.endsInMs,
      nextAtMs: next === undefined ? Infinity : atMs + next.startsInMs,
    }
  }
  if (shares.share <= 0 || Number.isNaN(shares.windowIndex))
    return { capacity: 0, window: Number.NaN, endAtMs: 0, nextAtMs: Infinity }
  const nextAtMs = shares.nextIndex > shares.windowIndex ? shares.nextStartAtMs : Infinity
  // Leased on its own in an earlier window, the share in force sent ahead: none of the share
  // (the coordinator leases the key of this window on its own: its lease comes with the
  // share's first lease of the window).
  if (state !== undefined && awaitsKeyLease(shares, state))
    return { capacity: 0, window: shares.windowIndex, endAtMs: shares.windowEndAtMs, nextAtMs }
  return {
    capacity: shareOfKey(shares.kind, shares.share, shares.keyLimits(key).capacity),
    window: shares.windowIndex,
    endAtMs: shares.windowEndAtMs,
    nextAtMs,
  }
}

/**
 * Whether the key, leased on its own in an earlier window, waits for its lease of the window
 * whose default share came ahead and is in force here (`quotaNow`): a window's edge for it.
 */
function awaitsKeyLease(shares: FamilyShares, state: KeyState): boolean {
  return shares.aheadInForce && state.lease?.window !== undefined && !keyLeaseRules(shares, state)
}

/**
 * Whether the key's window is over here by time (its budget in force ended, and the family's
 * lease of its window did), the next window's lease not come yet: a window's edge, not a lapse
 * mid-window (the coordinator unreachable) nor a budget spent.
 */
function pastWindow(shares: FamilyShares, state: KeyState, nowMs: number): boolean {
  return nowMs >= state.endAtMs && shares.windowEndAtMs > 0 && nowMs >= shares.windowEndAtMs
}

/**
 * Sets the key's budget to what it may spend now (the next window's share sent ahead comes in
 * force at its start here); a newer window starts its count at what was spent of it ahead.
 */
function refresh(shares: FamilyShares, state: KeyState): void {
  const nowMs = shares.hotClock.now()
  shares.advance(nowMs)
  const q = quotaNow(shares, state.key, state)
  state.slots = q.capacity
  if (q.window > state.usedWindow || Number.isNaN(state.usedWindow)) {
    if (!Number.isNaN(q.window)) {
      // What another process spent of a share handed on here counts as spent (shares.ts), and
      // what was spent of this window ahead, between the last one's end and its start (`take`).
      state.carried = state.nextUsedWindow === q.window ? state.nextUsed : 0
      state.used = shares.chargeOf(state.key, q.window) + state.carried
      state.usedWindow = q.window
    }
  }
  if (!(state.nextUsedWindow > state.usedWindow)) {
    state.nextUsed = 0
    state.nextUsedWindow = -1
  }
  state.window = q.window
  state.endAtMs = q.endAtMs
  // Once spent to its end, nothing changes by time alone until a new lease comes, or the next
  // window's share sent ahead comes in force.
  state.changeAtMs = nowMs < q.endAtMs ? q.endAtMs : q.nextAtMs
  state.epoch = shares.epoch
}

/**
 * A check between the end of the key's window here and the start of its next window's part sent
 * ahead (the family's share, or the key's own block: a few ms at each edge, as each is placed
 * for the clocks' drift): the coordinator's edge lies somewhere in it, so it is admitted only if
 * both windows' parts of the key have room, and spent of both (#41: as a named quota's,
 * client/enforcer.ts).
 */
function straddle(shares: FamilyShares, state: KeyState, cost: number, nowMs: number): boolean {
  if (
    state.usedWindow !== state.window ||
    nowMs >= state.changeAtMs ||
    state.used + cost > state.slots
  )
    return false
  let nextIndex: number
  let next: number
  const w = state.lease?.window
  if (w !== undefined) {
    // Leased on its own: its block of the next window, if one came with the lease in force.
    if (w.next === undefined || w.index !== state.window || !keyLeaseRules(shares, state))
      return false
    nextIndex = w.next.index
    next = w.next.capacity
  } else {
    if (!(shares.nextIndex === state.window + 1) || state.window !== shares.windowIndex)
      return false
    nextIndex = shares.nextIndex
    next = shareOfKey(shares.kind, shares.nextShare, shares.keyLimits(state.key).capacity)
  }
  const spentNext = state.nextUsedWindow === nextIndex ? state.nextUsed : 0
  if (spentNext + cost > next) return false
  state.used += cost
  state.nextUsed = spentNext + cost
  state.nextUsedWindow = nextIndex
  return true
}

/**
 * Of what the key used of `window`, what a key reset may not give back: what another process
 * spent of a share handed on here, and what was spent ahead of the window's start (`straddle`).
 */
export function chargedOf(shares: FamilyShares, state: KeyState, window: number): number {
  return shares.chargeOf(state.key, window) + (state.usedWindow === window ? state.carried : 0)
}

/**
 * A key's report with what it used of `window` (0 in another), and of that what was handed on
 * with a share (`charged`: spent by another process, counted here; a key reset gives back only
 * the rest).
 */
function usedEntry(
  shares: FamilyShares,
  state: KeyState,
  id: string,
  wants: number,
  window: number,
): KeyReport {
  const used = state.usedWindow === window ? state.used : 0
  const charged = Math.min(used, chargedOf(shares, state, window))
  return charged > 0
    ? { resource: id, wants, used, charged, window }
    : { resource: id, wants, used, window }
}

export const quotaKeys: KeyKind = Object.freeze<KeyKind>({
  refills: false,
  asksWhenSpent: true,
  newState(shares, key) {
    // A quota spends a budget, not a bucket: the bucket stays empty (the shape stays one).
    const state = new KeyState(key, new TokenBucket(shares.hotClock, 0, 0, 0))
    state.movedMs = shares.hotClock.now()
    refresh(shares, state)
    return state
  },
  refresh,
  take(shares, state, cost) {
    // Spent from the window's budget in force; nothing refills it before the next window.
    const nowMs = shares.hotClock.now()
    if (state.used + cost > state.slots || nowMs >= state.endAtMs)
      return nowMs >= state.endAtMs && straddle(shares, state, cost, nowMs)
    state.used += cost
    return true
  },
  // Past the window's spending by time alone: the family's lease of the window and the key's
  // end `windowGraceMs` before their window (none spills into the next), and the next window's
  // come with the round at its edge. Refusals there are not the key's demand: counted as such,
  // every key refused in that gap was leased on its own from the next window, in blocks of two
  // refresh periods' asking, and ran dry at the end of every window after (measured:
  // docs/benchmarks.md); asked of the coordinator, its part (ended as well) refused too.
  lapsed: (shares, state) =>
    pastWindow(shares, state, shares.hotClock.now()) || awaitsKeyLease(shares, state),
  msUntil(shares, state, cost) {
    const nowMs = shares.hotClock.now()
    const leftMs = state.endAtMs - nowMs
    if (state.used + cost <= state.slots && leftMs > 0) return 0
    // Refused at the window's edge: the next window's lease is a round away, not a window
    // (Retry-After: never the window's length when the next window is about to start).
    if (pastWindow(shares, state, nowMs) || awaitsKeyLease(shares, state))
      return quotaHorizonMs(shares.refreshMs)
    // This process's default share of the key is spent: the key is leased on its own within a
    // report or two, from what the other processes leave of its budget.
    if (!keyLeaseRules(shares, state) && shares.windowEndAtMs > nowMs)
      return quotaHorizonMs(shares.refreshMs)
    // Its own budget spent while the key had some left at other processes when this lease
    // came: the coordinator moves it here within a round or two, not at the window's end.
    if (leftMs > 0 && (state.lease?.window?.elsewhere ?? 0) >= cost)
      return quotaHorizonMs(shares.refreshMs)
    // Its own budget spent (as a named quota's block): the next window's.
    return leftMs > 0 ? leftMs : Infinity
  },
  remaining: (_shares, state) => Math.max(0, state.slots - state.used),
  untracked: (shares, key) => quotaKeys.leaseOf(shares, key, undefined).burst,
  // What the coordinator counted left of the key at the others as its lease left (their reports),
  // while that lease rules the key here.
  elsewhere: (shares, state) =>
    keyLeaseRules(shares, state) ? state.lease?.window?.elsewhere : undefined,
  msUntilFull: (shares) => Math.max(0, shares.windowEndAtMs - shares.hotClock.now()),
  leaseOf(shares, key, state) {
    const q = quotaNow(shares, key, state)
    const source =
      q.capacity === 0 && q.endAtMs === 0
        ? 'none'
        : state?.lease?.window !== undefined &&
            (keyLeaseRules(shares, state) || awaitsKeyLease(shares, state))
          ? 'key'
          : 'default'
    return Number.isNaN(q.window)
      ? { capacity: q.capacity, burst: q.capacity, source }
      : { capacity: q.capacity, burst: q.capacity, source, window: q.window }
  },
  /**
   * Nothing spent of it in the family's window, and no lease of its own for that window, nor
   * one awaited (either would be lost, and the key would come back with a whole default share).
   */
  evictable(shares, state) {
    if (state.waiters !== undefined) return false
    if (state.lease !== undefined && keyLeaseRules(shares, state)) return false
    // Waiting for its lease of the window whose share came ahead: forgotten, it would come back
    // on that share, though leased on its own there (found by the model: 13 of 12).
    if (awaitsKeyLease(shares, state)) return false
    return state.used === 0 || !(state.usedWindow >= shares.windowIndex)
  },
  fits: (state) => state.used <= state.slots,
  wants: (state, elapsedSec, waiting) => (state.asked + waiting) / elapsedSec,
  /** Leased on its own for this window: reported while asked for (lately), or while it has spent. */
  leasedEntry(shares, state, id, wants, lately) {
    if (state.lease === undefined || !keyLeaseRules(shares, state)) return { leased: false }
    if (state.epoch !== shares.epoch || shares.hotClock.now() >= state.changeAtMs)
      refresh(shares, state)
    // The window of the budget in force: the lease's, or its next one's sent ahead.
    const window = state.window
    const used = state.usedWindow === window ? state.used : 0
    const must = state.mustReport
    state.mustReport = false
    return {
      leased: true,
      entry:
        wants > 0 || lately || used > 0 || must
          ? usedEntry(shares, state, id, wants, window)
          : undefined,
    }
  },
  /**
   * On the default share of a budget: reported once refused, or once the pace asked for would
   * spend what is left within the quota horizon (two refresh periods).
   */
  wantsOwnLease(shares, state, _key, wants, refused) {
    if (state.epoch !== shares.epoch || shares.hotClock.now() >= state.changeAtMs)
      refresh(shares, state)
    // At a window's edge nothing is known of the next window's asking yet (lapsed, above).
    if (pastWindow(shares, state, shares.hotClock.now()) || awaitsKeyLease(shares, state))
      return false
    const left = state.slots - state.used
    return refused > 0 || (wants > 0 && wants * (quotaHorizonMs(shares.refreshMs) / 1000) >= left)
  },
  /**
   * A quota's key says what it spent of the window's default share: the coordinator's first
   * budget for it then starts from that, not below it (a budget below what was spent could not
   * be acknowledged, and the key would be refused until the next report).
   */
  candidateEntry: (shares, state, id, wants) =>
    state.used > 0 && state.usedWindow === state.window
      ? usedEntry(shares, state, id, wants, state.usedWindow)
      : { resource: id, wants },
})
