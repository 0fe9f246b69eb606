import { handOver } from '../handover.js'
import { grantIncreases } from '../increases.js'
import { send } from '../lease-out.js'
import { defaultHolders, defaultWeights } from './default-holders.js'
import type { Shape } from './shape.js'

/** Refresh periods after a family's first round here during which a lone holder leaves room for two more. */
const youngRefreshes = 2

/**
 * A keyed quota's own resource: each holder's default share of every key's
 * budget for the window (a fraction; capacity 1 is every key's whole
 * budget). A share sent in a window is never taken back within it: a
 * process cannot say what it spent of a million keys, so its share counts
 * as spent of every key until the window ends, whatever becomes of it. A
 * share may grow, up to the holder's weighted part among the default
 * holders (defaultHolders) and one holder more, out of what no share of
 * the window holds. The one more is room for a process that comes
 * mid-window (a gateway restarted, whose old share stays spent, or one
 * added), so it too decides new keys at once; one that comes once the
 * shares took everything gets none, and asks per key (its keys are leased
 * on their own). Every holder without a lease of this window gets one, at
 * 0 where nothing is free: with it go leases of the family's hot keys
 * (lease-out.ts), so no process takes a default share of a key that is
 * leased on its own in the window.
 *
 * Processes that start together come within a second or so of each other, and a share is never
 * taken back within its window: the first alone would hold half of every key's budget for the
 * whole window (a day, for a daily quota), the others a quarter each and nothing kept, and a
 * customer's burst spread over them found 17 of 100 stranded at the first (#41: bimodal, 83 or
 * 99-100 of 100). So for its first `youngRefreshes` here, a lone holder leaves room for two
 * more (a third of every key, not half), and its share grows to its part after.
 */
export const keyedQuotaShareShape: Shape = Object.freeze<Shape>({
  name: 'keyed quota share',
  familyShare: true,
  hotKey: false,
  // Its default share of the next window, sent ahead with the leases renewed before the edge:
  // the share each holds of this one (never more than what the shares sent ahead leave). A
  // share is never taken back within its window, so the next window starts with the split this
  // one ended with, and its rounds grow it from there; a holder without a share of this window
  // (none was free) gets its first at the next window's first round, as before. The entries
  // are those whose lease of this window is renewed (edge-renewal.ts).
  // A holder the last round marked as decided centrally (it asks the coordinator, which decides
  // for it: default-holders.ts) gets none ahead: it has no default share in a crowded family,
  // and a share it got before that was known (after a restart, its restored entry said nothing
  // of how it checks) was carried into every next window unused while the coordinator's part,
  // deciding for it, went without (#41, the keyed quota over 30 gateways through a restart). Its
  // part goes to the default holders at the next window's first round.
  nextBlocks(r, entries, _next, left) {
    const parts = new Float64Array(entries.length)
    let free = left
    for (let i = 0; i < entries.length && free > r.epsilon; i++) {
      const e = entries[i]!
      if (e.decidedCentrally) continue
      parts[i] = Math.min(e.newest, free)
      free -= parts[i]!
    }
    return parts
  },
  round(pool, r, sharing, _reserved, nowMs) {
    const windowIndex = pool.windowOf(r, nowMs)!.index
    // A vacancy goes only to a holder the default split gives a share to now: split first, so a
    // process restored from a ledger and not heard from since (its entry says nothing of how it
    // checks) is no heir in a crowded family. The dead coordinator's part's share went to such a
    // gateway after a restart, before the new part came (#41: the new part held a 31st of the
    // family to the window's end, and each key nobody had asked of it was refused).
    const defaults = defaultHolders(r, sharing)
    handOver(
      pool,
      r,
      sharing.filter((_, i) => defaults[i]! > 0),
      windowIndex,
      nowMs,
    )
    const weightOf = defaultWeights(sharing)
    // The holders that share, those that hold a share of this window without sharing now (gone,
    // or replaced: theirs stays spent), and one more of the largest weight: room for one that
    // comes later. Counting the absent keeps their part from going to the others as growth.
    let weights = 0
    let spare = 0
    let holders = 0
    for (let i = 0; i < sharing.length; i++)
      if (defaults[i]! > 0) {
        holders++
        weights += weightOf[i]!
        spare = Math.max(spare, sharing[i]!.weight)
      }
    const shares = new Set(sharing)
    for (const e of r.entries.values())
      if (e.leaseWindow === windowIndex && e.committed > 0 && !shares.has(e)) weights += e.weight
    if (Number.isNaN(r.sharedSinceMs)) r.sharedSinceMs = nowMs
    const young = nowMs - r.sharedSinceMs < youngRefreshes * r.settings.refreshMs
    // A lone holder, young: room for two more.
    weights += young && holders === 1 ? 2 * spare : spare
    const whole = r.settings.family!.defaultShare ?? 1
    for (let i = 0; i < sharing.length; i++) {
      const e = sharing[i]!
      const fair = defaults[i]! > 0 ? (whole * weightOf[i]!) / weights : 0
      // What it holds of an earlier window is no share of this one (it lapses with its window).
      e.target = Math.max(e.leaseWindow === windowIndex ? e.newest : 0, fair)
    }
    const eps = r.epsilon
    r.clearStarved()
    for (const e of sharing) if (e.target > e.newest + eps) r.starve(e)
    grantIncreases(pool, r, nowMs, true)
    // A holder the increases did not reach gets this window's lease all the same: its fair part
    // where an earlier window's lease still holds that much, else what it has (0 at a start).
    for (const e of sharing)
      if (e.leaseWindow !== windowIndex) send(pool, e, Math.min(e.target, e.newest), nowMs)
  },
})
