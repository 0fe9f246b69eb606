import type { NormalisedProblem } from './validate.js'
import type { ShareRule } from './types.js'

/**
 * Shares one priority band's available capacity: first between the tenants
 * present in the band (each demanding its clients' total, bounded by what
 * is left of its cap), then inside each tenant between its clients, both by
 * `rule`. Writes `out` for the band's members, debits `capRoom` and returns
 * the band's total.
 */
export function shareBand(
  p: NormalisedProblem,
  rule: ShareRule,
  members: Int32Array,
  count: number,
  available: number,
  capRoom: Float64Array,
  out: Float64Array,
): number {
  // Fast path: one tenant in the band. Sharing between one tenant is the
  // identity, bounded by the tenant's cap room.
  const first = p.tenantOf[members[0]!]!
  let oneTenant = true
  for (let k = 1; k < count; k++) {
    if (p.tenantOf[members[k]!] !== first) {
      oneTenant = false
      break
    }
  }
  if (oneTenant) {
    const room = capRoom[first]!
    const total = rule(p.wants, p.weights, members, count, available < room ? available : room, out)
    // Rounding may put a sum a hair above a cap; room never goes negative.
    capRoom[first] = room > total ? room - total : 0
    return total
  }

  // Group the band's members by tenant (counting sort: stable, O(n + T)).
  const T = p.tenantCount
  const counts = new Int32Array(T + 1)
  for (let k = 0; k < count; k++) counts[p.tenantOf[members[k]!]! + 1]!++
  for (let t = 0; t < T; t++) counts[t + 1]! += counts[t]!
  const starts = counts.slice()
  const grouped = new Int32Array(count)
  for (let k = 0; k < count; k++) {
    const i = members[k]!
    grouped[starts[p.tenantOf[i]!]!++] = i
  }

  const tenantDemand = new Float64Array(T)
  const present = new Int32Array(T)
  let presentCount = 0
  for (let t = 0; t < T; t++) {
    const from = counts[t]!
    const to = counts[t + 1]!
    if (from === to) continue
    let sum = 0
    for (let k = from; k < to; k++) sum += p.wants[grouped[k]!]!
    const room = capRoom[t]!
    tenantDemand[t] = sum < room ? sum : room
    present[presentCount++] = t
  }
  const tenantGrant = new Float64Array(T)
  rule(tenantDemand, p.tenantWeights, present, presentCount, available, tenantGrant)

  let total = 0
  for (let j = 0; j < presentCount; j++) {
    const t = present[j]!
    const from = counts[t]!
    const given = rule(
      p.wants,
      p.weights,
      grouped.subarray(from),
      counts[t + 1]! - from,
      tenantGrant[t]!,
      out,
    )
    capRoom[t] = capRoom[t]! > given ? capRoom[t]! - given : 0
    total += given
  }
  return total
}

/**
 * Splits the clients into priority bands, highest first, as index lists.
 * One band when all priorities are equal (the common case costs one pass).
 */
export function priorityBands(p: NormalisedProblem): Int32Array[] {
  const n = p.ids.length
  if (p.singleBand) {
    const all = new Int32Array(n)
    for (let i = 0; i < n; i++) all[i] = i
    return [all]
  }
  const byPriority = new Map<number, number[]>()
  for (let i = 0; i < n; i++) {
    const prio = p.priorities[i]!
    let list = byPriority.get(prio)
    if (list === undefined) byPriority.set(prio, (list = []))
    list.push(i)
  }
  return [...byPriority.keys()]
    .sort((a, b) => b - a)
    .map((prio) => Int32Array.from(byPriority.get(prio)!))
}
