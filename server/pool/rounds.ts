import { promoteDue } from './ahead.js'
import type { Entry, ResourceState } from './entry.js'
import { idleKey, keyIsCold, retireKey } from './hot-keys.js'
import { send } from './lease-out.js'
import { forget, unsubscribe } from './registry.js'
import { centralClientId } from './shapes/index.js'
import { offerSpent } from './spent-decrease.js'
import type { PoolState } from './state.js'

/**
 * One round for a resource: drop lapsed leases, then (unless learning) set
 * apart what silent clients hold and hand the rest to the resource's shape,
 * which sets targets and sends the leases that follow (shapes/). Its
 * batches are left for the caller's flush.
 *
 * What a silent client holds is kept out of what is shared: a client that
 * is disconnected, or that has left a decrease unacknowledged for a whole
 * refresh period (stalled, or draining slots), keeps its commitment, and
 * the others share the capacity left beside it. So a capacity cut takes
 * effect on what such clients hold too: the others shrink until it lapses.
 */
export function round(pool: PoolState, resourceId: string, nowMs: number): void {
  const r = pool.resources.get(resourceId)
  if (r === undefined) return
  sweepResource(pool, r, nowMs)
  if (r.entries.size === 0) {
    forget(pool, r)
    return
  }
  r.rounds++
  if (nowMs < r.learningUntilMs) return
  if (r.claims.size > 0) r.clearClaims()

  const silentSinceMs = nowMs - r.settings.refreshMs
  const quota = pool.windowOf(r, nowMs)
  const sharing: Entry[] = []
  let reserved = 0
  for (const e of r.entries.values()) {
    if (!e.client.connected) {
      e.target = 0
      if (quota !== undefined && deadPartBefore(e, quota.index)) e.clear(nowMs)
      // A rate share released with what it held waits for its heir: the others keep their
      // shares meanwhile, rather than grow to it (held-handover.ts).
      if (e.heldVacancy === undefined) reserved += e.committed
    } else if (e.awaitsDecreaseAck(silentSinceMs)) {
      // Its decrease is on its way or in force, but not acknowledged: keep what it holds.
      // A quota's client cannot acknowledge a budget below what it spent before the decrease
      // came (its report lagged): it gets what it reports used (spent-decrease.ts).
      if (quota !== undefined) offerSpent(pool, e, nowMs)
      e.target = e.newest
      reserved += e.committed
    } else sharing.push(e)
  }
  r.shape.round(pool, r, sharing, reserved, nowMs)
  // A block sent ahead, now this window's lease: sent again if the round sent nothing newer, so
  // that a client whose copy came late (its window then opens late) has it at once.
  // A keyed quota's share goes with its hot keys' leases of the window (lease-out.ts, `send`).
  for (const e of sharing) {
    const record = e.promoted
    if (record === undefined) continue
    if (e.leases.at(-1) === record) send(pool, e, e.newest, nowMs)
    e.promoted = undefined
  }
}

/**
 * Drops what has lapsed from a resource's entries and recomputes what they
 * commit; forgets clients gone with nothing left, a hot key's idle holders,
 * and a hot key that went cold (hot-keys.ts); a block sent ahead becomes its
 * entry's lease once its window is in force (ahead.ts).
 */
export function sweepResource(pool: PoolState, r: ResourceState, nowMs: number): void {
  let sum = 0
  if (nowMs > r.seenMs) r.seenMs = nowMs
  for (const e of r.entries.values()) {
    // A block sent ahead of its window is a lease once the window is in force (ahead.ts).
    promoteDue(pool, e, nowMs)
    if (e.refresh(nowMs)) pool.touch(e)
    sum += e.committed
  }
  r.committedSum = sum
  const isKey = r.shape.hotKey
  if (isKey && keyIsCold(r, nowMs)) return retireKey(pool, r)
  for (const e of r.entries.values()) {
    if (!e.client.connected && e.leases.length === 0) unsubscribe(pool, e)
    else if (isKey && idleKey(e, nowMs)) {
      r.noteIdle(e.client.key)
      unsubscribe(pool, e)
    }
  }
}

/**
 * A quota's entry of a coordinator's own part that is gone (a dead coordinator's, restored from
 * its ledger or set aside at its successor's takeover: clients.ts `freeDeadCentral`), whose
 * newest lease is of a window before `windowIndex` and which holds no block of this window or a
 * later one sent ahead: it holds nothing of this window. It spent nothing of it: a quota's
 * budget is spent within its window only (client/keyed/quota-keys.ts), this window's only from
 * a lease of it or a block of it sent ahead, and it had neither; nor will it spend anything
 * again (its coordinator died before this one restored the ledger). Its leases are cleared.
 * Counted on to their safe hold (a window's end, plus `safeHoldMs`), they held a hot key's whole
 * budget through the first 1-3 s of the first window after a coordinator restart, when the
 * central limiter admits most of it (#41: a keyed quota over 30 gateways through a restart, ~2%
 * of the run's checks refused there). What a live process that is silent holds is not touched:
 * its clock may place the window's end elsewhere.
 */
function deadPartBefore(e: Entry, windowIndex: number): boolean {
  return (
    e.client.clientId === centralClientId &&
    e.leasedBefore(windowIndex) &&
    (e.ahead === undefined || e.ahead.window < windowIndex)
  )
}
