import type { NormalisedProblem } from './validate.js'
import { waterFill } from './water-fill.js'

/**
 * `spread`: gives capacity left after every demand is met out as headroom,
 * first between the tenants that have clients, by tenant weight and within
 * what is left of each tenant's cap (water-filling, so a capped tenant's
 * unused share flows to the others), then inside each tenant to its
 * clients in proportion to their weights, across all priority bands.
 * Returns the amount given out.
 */
export function spreadSurplus(
  p: NormalisedProblem,
  leftover: number,
  capRoom: Float64Array,
  out: Float64Array,
): number {
  const n = p.ids.length
  if (leftover <= 0 || n === 0) return 0
  const T = p.tenantCount
  const clientWeight = new Float64Array(T)
  for (let i = 0; i < n; i++) clientWeight[p.tenantOf[i]!]! += p.weights[i]!
  const present = new Int32Array(T)
  let presentCount = 0
  for (let t = 0; t < T; t++) if (clientWeight[t]! > 0) present[presentCount++] = t

  const extra = new Float64Array(T)
  const given = waterFill(capRoom, p.tenantWeights, present, presentCount, leftover, extra)
  if (given <= 0) return 0
  for (let i = 0; i < n; i++) {
    const t = p.tenantOf[i]!
    out[i] = out[i]! + (extra[t]! * p.weights[i]!) / clientWeight[t]!
  }
  for (let j = 0; j < presentCount; j++) {
    const t = present[j]!
    capRoom[t] = capRoom[t]! > extra[t]! ? capRoom[t]! - extra[t]! : 0
  }
  return given
}
