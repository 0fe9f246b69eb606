/**
 * The cases every share rule answers alike: when total demand fits in the
 * capacity everyone gets its demand, and with no capacity nobody gets
 * anything. Writes `out` and returns the total given in those cases, or -1
 * when the rule must actually share.
 */
export function shareTrivially(
  demand: Float64Array,
  members: Int32Array,
  count: number,
  capacity: number,
  out: Float64Array,
): number {
  let sumDemand = 0
  for (let k = 0; k < count; k++) sumDemand += demand[members[k]!]!
  if (sumDemand <= capacity) {
    for (let k = 0; k < count; k++) {
      const i = members[k]!
      out[i] = demand[i]!
    }
    return sumDemand
  }
  if (capacity <= 0) {
    for (let k = 0; k < count; k++) out[members[k]!] = 0
    return 0
  }
  return -1
}
