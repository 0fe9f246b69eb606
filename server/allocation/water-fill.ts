import { shareTrivially } from './trivial.js'
import type { ShareRule } from './types.js'

/**
 * Exact weighted max-min fairness by water-filling.
 *
 * Finds the level λ with g_i = min(d_i, w_i·λ) and Σ g_i = min(C, Σ d_i):
 * claimants whose key d_i/w_i is at or below λ are satisfied, the rest get
 * w_i·λ. f(λ) = Σ min(d_i, w_i·λ) is piecewise linear and increasing, and
 * its breakpoints are the keys, so λ lies between two neighbouring keys.
 *
 * Rather than sort all keys (O(n log n)), a selection search narrows the
 * bracket: partition the open keys three ways around a pivot key p, and
 * evaluate f(p) from running sums — Σd of everything known satisfied plus
 * p·Σw of everything known open. If f(p) ≤ C, every key ≤ p is satisfied;
 * otherwise every key ≥ p is open. Each step discards one side, so the
 * expected cost is O(n) (pivots are median-of-three at pseudo-random
 * positions, deterministic per input size, so runs are reproducible).
 * Once no key is left undecided, λ = (C − Σd_satisfied) / Σw_open exactly.
 *
 * Unlike Doorman's two-round approximation, this never over-grants a
 * claimant nor strands capacity.
 */
export const waterFill: ShareRule = (demand, weight, members, count, capacity, out) => {
  const trivial = shareTrivially(demand, members, count, capacity, out)
  if (trivial >= 0) return trivial

  const level = waterLevel(demand, weight, members, count, capacity)
  let total = 0
  for (let k = 0; k < count; k++) {
    const i = members[k]!
    const wl = weight[i]! * level
    const g = demand[i]! < wl ? demand[i]! : wl
    out[i] = g
    total += g
  }
  return total
}

/** The water level λ for claimants whose total demand exceeds `capacity` > 0. */
function waterLevel(
  demand: Float64Array,
  weight: Float64Array,
  members: Int32Array,
  count: number,
  capacity: number,
): number {
  // Undecided claimants, in parallel arrays partitioned in place.
  const keys = new Float64Array(count)
  const d = new Float64Array(count)
  const w = new Float64Array(count)
  for (let k = 0; k < count; k++) {
    const i = members[k]!
    const di = demand[i]!
    const wi = weight[i]!
    d[k] = di
    w[k] = wi
    keys[k] = di / wi
  }

  let satisfiedDemand = 0 // Σd of claimants known to lie at or below λ
  let openWeight = 0 // Σw of claimants known to lie above λ
  let lo = 0
  let hi = count
  let seed = (count * 2654435761) >>> 0 || 1
  while (lo < hi) {
    // Median of three keys at pseudo-random positions (xorshift32).
    const span = hi - lo
    seed ^= seed << 13
    seed ^= seed >>> 17
    seed ^= seed << 5
    const a = keys[lo + ((seed >>> 0) % span)]!
    const b = keys[lo + ((seed >>> 11) % span)]!
    const c = keys[lo + ((seed >>> 21) % span)]!
    const pivot = a < b ? (b < c ? b : a < c ? c : a) : a < c ? a : b < c ? c : b

    // Three-way partition of [lo, hi): [lo, lt) < pivot, [lt, gt) == pivot, [gt, hi) > pivot.
    let lt = lo
    let gt = hi
    let k = lo
    let lessDemand = 0
    let equalDemand = 0
    let equalWeight = 0
    let greaterWeight = 0
    while (k < gt) {
      const key = keys[k]!
      if (key < pivot) {
        lessDemand += d[k]!
        swap(keys, d, w, k, lt)
        lt++
        k++
      } else if (key > pivot) {
        gt--
        greaterWeight += w[k]!
        swap(keys, d, w, k, gt)
      } else {
        equalDemand += d[k]!
        equalWeight += w[k]!
        k++
      }
    }

    const atPivot =
      satisfiedDemand + lessDemand + equalDemand + pivot * (openWeight + greaterWeight)
    if (atPivot <= capacity) {
      // λ ≥ pivot: every key ≤ pivot is satisfied.
      satisfiedDemand += lessDemand + equalDemand
      lo = gt
    } else {
      // λ < pivot: every key ≥ pivot is open.
      openWeight += equalWeight + greaterWeight
      hi = lt
    }
  }
  // Rounding can leave C − Σ a hair below zero; the level is never negative.
  return openWeight > 0 ? Math.max(0, (capacity - satisfiedDemand) / openWeight) : Infinity
}

function swap(keys: Float64Array, d: Float64Array, w: Float64Array, i: number, j: number): void {
  const key = keys[i]!
  keys[i] = keys[j]!
  keys[j] = key
  const di = d[i]!
  d[i] = d[j]!
  d[j] = di
  const wi = w[i]!
  w[i] = w[j]!
  w[j] = wi
}
