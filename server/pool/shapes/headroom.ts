import type { ClientDemand } from '../../allocation/index.js'
import type { Entry, ResourceState } from '../entry.js'

/**
 * Surplus spread: a lease whose new target differs from it only in the
 * headroom above its client's demand, and by at most `tolerance` of the
 * target, stays as it is (it is renewed, not changed). Under demand that
 * varies from report to report, every spread target moves every round;
 * sending each move costs a lease and an ack per client per round, and
 * gives nobody capacity it needs. Exact where it matters: when a client
 * holds less than min(its demand, its target) and free capacity cannot
 * make up every such shortfall, nothing is kept and every change goes out.
 * A kept lease always covers its client's demand (or target), so each
 * client's max-min share of its demand is delivered as before; only
 * headroom lags, by at most `tolerance`.
 *
 * A lease kept below its target leaves capacity to the others; one kept
 * above it holds capacity some other target may need. So the first are
 * all kept, and the second only while the targets still fit in `shared`
 * (what the round shared out): otherwise a client whose lease is far below
 * its target could never be granted it (a holding 27 of 27, kept against a
 * target of 26.5, left d at 0 against its 0.5 for good).
 */
export function keepClose(
  r: ResourceState,
  sharing: readonly Entry[],
  clients: readonly ClientDemand[],
  tolerance: number,
  shared: number,
): void {
  const eps = r.epsilon
  let shortfall = 0
  let targets = 0
  for (let i = 0; i < sharing.length; i++) {
    const e = sharing[i]!
    targets += e.target
    const need = Math.min(clients[i]!.wants, e.target)
    if (e.newest < need - eps) shortfall += e.target - e.newest
  }
  if (shortfall > r.settings.capacity - r.committedSum + eps) return
  for (let pass = 0; pass < 2; pass++)
    for (let i = 0; i < sharing.length; i++) {
      const e = sharing[i]!
      const above = e.newest > e.target
      if (above !== (pass === 1) || !keepable(e, clients[i]!.wants, tolerance)) continue
      // Pass 1 keeps a lease above its target only while every target still fits.
      if (above && targets + (e.newest - e.target) > shared + eps) continue
      targets += e.newest - e.target
      e.target = e.newest
    }
}

/** A lease in force (not lapsed to its fallback) that covers its demand, within `tolerance` of its target. */
function keepable(e: Entry, wants: number, tolerance: number): boolean {
  const eps = e.resource.epsilon
  const last = e.leases.at(-1)
  if (last === undefined || Math.abs(last.capacity - e.newest) > eps) return false
  if (e.newest < Math.min(wants, e.target) - eps) return false
  return Math.abs(e.target - e.newest) <= tolerance * e.target
}
