import { keyIdOf } from '../../shared/index.js'
import type { ResourceState } from './entry.js'
import { seedKey } from './hot-keys.js'
import { send } from './lease-out.js'
import { subscribe } from './registry.js'
import type { PoolState } from './state.js'

/**
 * A keyed family's key reset (`POST /v1/key/reset`, `sluice key --reset`). A keyed quota's:
 * the key gets its whole budget again for the rest of the window, as one
 * central counter set back to 0 would, through the same path as any
 * change of a budget, so the bound holds.
 *
 * How: what the processes spent of the key in the window is not taken back
 * from them (each counts it still, and a lease of the key is a budget for
 * the whole window: what it spent plus what it may spend). The coordinator
 * adds to the window's budget what they reported spent (`units`); from then
 * on the key's leases share capacity + units, and since each process spent
 * at least what it reported, what all of them may spend from that moment is
 * at most the capacity: one whole budget, never more. To know what each
 * spent, the key is leased on its own (a key on the default shares is made
 * hot, seeded from them, as when a process asks for it: hot-keys.ts) and the
 * reset takes effect at the key's first round once every connected holder
 * has reported the key since the reset was asked, or `waitRefreshes` refresh
 * periods after it (a process that spent nothing of the key says nothing of
 * it): until then the key has what it had. What a process spent and never
 * reported (one killed) is not given back: the reset gives at most a whole
 * budget, perhaps less, never more.
 *
 * A reset lasts to the window's end (the next window starts whole anyway).
 * It is not in the ledger: a coordinator restarted in the window forgets it,
 * and the key has what was left of its budget as if never reset (less,
 * never more: reset it again).
 */

/** Refresh periods a reset waits for holders that say nothing of the key. */
export const waitRefreshes = 3

export type KeyResetOutcome =
  /** Asked: it takes effect within `waitRefreshes` refresh periods. */
  | { readonly outcome: 'pending'; readonly window: number; readonly madeHot: boolean }
  /** A rate key: every holder's bucket of it is sent full (`refilled` leases), at once. */
  | { readonly outcome: 'refilled'; readonly holders: number; readonly madeHot: boolean }
  /** No process holds any of the family: nothing of the key is spent. */
  | { readonly outcome: 'unused' }
  | { readonly outcome: 'not-keyed' | 'not-quota' }
  /** The family leases `maxHotKeys` keys on their own already; the key cannot be made one. */
  | { readonly outcome: 'hot-keys-full'; readonly maxHotKeys: number }

export function resetKey(
  pool: PoolState,
  prefix: string,
  key: string,
  nowMs: number,
): KeyResetOutcome {
  const keyId = keyIdOf(prefix, key)
  const settings = pool.resources.get(keyId)?.settings ?? pool.settingsFor(keyId)
  const family = settings?.family
  if (settings === undefined || family === undefined || family.role !== 'key')
    return { outcome: 'not-keyed' }
  if (settings.quotaWindow === undefined && settings.kind !== 'rate')
    return { outcome: 'not-quota' }
  let r = pool.resources.get(keyId)
  const madeHot = r === undefined
  if (r === undefined) {
    const holders = pool.resources.get(family.familyId)
    let first = undefined
    for (const e of holders?.entries.values() ?? []) if (e.leases.length > 0) first ??= e
    if (first === undefined) return { outcome: 'unused' }
    if ((pool.familyKeys.get(family.familyId)?.size ?? 0) >= family.maxHotKeys)
      return { outcome: 'hot-keys-full', maxHotKeys: family.maxHotKeys }
    r = subscribe(pool, first.client, keyId, settings).resource
    seedKey(pool, r, nowMs, (e, c, n) => send(pool, e, c, n))
  }
  if (settings.quotaWindow === undefined) return refill(pool, r, nowMs, madeHot)
  const window = pool.windowOf(r, nowMs)!.index
  r.reset = { window, units: r.resetUnits(window), askedMs: nowMs }
  return { outcome: 'pending', window, madeHot }
}

/**
 * A rate key's reset: each holder of the key is sent its lease again, its bucket to be filled
 * to the lease's burst (`full`), as one central bucket set back to full would be. The key's
 * leases together hold at most its capacity, so at most its burst: from the moment each holder
 * fills its bucket, the key admits at most a burst plus its rate, as a fresh key does. Over an
 * interval across the reset, one burst more: what a central bucket reset in it admits too. A
 * holder not connected, or one that lost the lease on the way, keeps its bucket as it was (less,
 * never more); a client that does not know `full` on a key's lease ignores it the same way.
 * Nothing of it is in the ledger: nothing needs to be (a restart loses no bound by it).
 */
function refill(
  pool: PoolState,
  r: ResourceState,
  nowMs: number,
  madeHot: boolean,
): KeyResetOutcome {
  let holders = 0
  for (const e of r.entries.values()) {
    if (!e.client.connected || e.leases.length === 0) continue
    e.refillDue = true
    send(pool, e, e.newest, nowMs)
    holders++
  }
  return { outcome: 'refilled', holders, madeHot }
}

/**
 * At a round of a quota: a reset asked in this window takes effect once every connected
 * holder has reported the key since, or `waitRefreshes` refresh periods after it was asked;
 * one of an earlier window is dropped.
 */
export function settleReset(r: ResourceState, windowIndex: number, nowMs: number): void {
  const reset = r.reset
  if (reset === undefined) return
  if (reset.window !== windowIndex) {
    r.reset = undefined
    return
  }
  const askedMs = reset.askedMs
  if (askedMs === undefined) return
  let heard = true
  for (const e of r.entries.values())
    if (e.client.connected && e.reportedMs < askedMs) heard = false
  if (!heard && nowMs - askedMs < waitRefreshes * r.settings.refreshMs) return
  // What each spent itself: a share handed on brings its leaver's units, counted spent by the
  // heir too (`charged`); the leaver's own entry may count them as well.
  let units = 0
  for (const e of r.entries.values())
    if (e.usedWindow === windowIndex) units += Math.max(0, e.used - e.charged)
  r.reset = { window: windowIndex, units }
}
