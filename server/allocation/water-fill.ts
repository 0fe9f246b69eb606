import type { ShareRule } from './types.js'

/**
 * Exact weighted max-min fairness by water-filling.
 *
 * Finds the level λ with g_i = min(d_i, w_i·λ) and Σ g_i = min(C, Σ d_i).
 * Claimants whose d_i/w_i lies at or below λ are satisfied; the rest get
 * w_i·λ. The sorted keys d_i/w_i bracket λ: a binary search over them
 * (each probe one O(n) pass) finds the last key k_j with f(k_j) ≤ C, and λ
 * then solves f exactly on [k_j, k_{j+1}). O(n log n) overall, and the sort
 * is of a Float64Array (native numeric sort), which is what makes a million
 * claimants cheap.
 *
 * Unlike Doorman's two-round approximation, this never over-grants a
 * claimant nor strands capacity.
 */
export const waterFill: ShareRule = (demand, weight, members, count, capacity, out) => {
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

  // Gather into contiguous arrays: the probes below read them many times.
  const d = new Float64Array(count)
  const w = new Float64Array(count)
  const keys = new Float64Array(count)
  for (let k = 0; k < count; k++) {
    const i = members[k]!
    const di = demand[i]!
    const wi = weight[i]!
    d[k] = di
    w[k] = wi
    keys[k] = di / wi
  }
  const sorted = keys.slice().sort()

  // Invariant: f(sorted[lo]) ≤ C (lo = -1 stands for level -∞), f(sorted[hi]) > C.
  // f(sorted[count-1]) = Σd > C, so hi starts there.
  let lo = -1
  let hi = count - 1
  while (hi - lo > 1) {
    const mid = (lo + hi) >>> 1
    const level = sorted[mid]!
    let f = 0
    for (let k = 0; k < count; k++) {
      const wl = w[k]! * level
      f += d[k]! < wl ? d[k]! : wl
    }
    if (f <= capacity) lo = mid
    else hi = mid
  }
  const threshold = lo >= 0 ? sorted[lo]! : -Infinity

  let satisfiedDemand = 0
  let openWeight = 0
  for (let k = 0; k < count; k++) {
    if (keys[k]! <= threshold) satisfiedDemand += d[k]!
    else openWeight += w[k]!
  }
  // Rounding can leave C − Σ a hair below zero; the level is never negative.
  const level = Math.max(0, (capacity - satisfiedDemand) / openWeight)

  let total = 0
  for (let k = 0; k < count; k++) {
    let g: number
    if (keys[k]! <= threshold) g = d[k]!
    else {
      const wl = w[k]! * level
      g = d[k]! < wl ? d[k]! : wl
    }
    out[members[k]!] = g
    total += g
  }
  return total
}
