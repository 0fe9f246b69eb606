import { priorityBands, shareBand } from './layers.js'
import { proportionalShare } from './proportional.js'
import { spreadSurplus } from './surplus.js'
import type { Allocation, AllocationProblem, ShareRule } from './types.js'
import { normaliseProblem, type NormalisedProblem } from './validate.js'
import { waterFill } from './water-fill.js'

/**
 * Shares a resource's capacity among its clients. Pure: no clock, no I/O.
 *
 * `fair-share` and `proportional-share` are layered, outermost first:
 * priority bands (a lower band gets only what higher bands leave), tenants
 * inside a band (bounded by each tenant's cap across all bands), clients
 * inside a tenant. `static` grants min(wants, capacity) per client and
 * `none` grants wants; both ignore tenants, priorities and surplus.
 *
 * Throws a `SluiceError` (SLUICE_ERR_ALLOC_*) naming the field on invalid
 * input; never returns a NaN or negative grant.
 */
export function allocate(problem: AllocationProblem): Allocation {
  return allocateNormalised(normaliseProblem(problem))
}

export function allocateNormalised(p: NormalisedProblem): Allocation {
  const n = p.ids.length
  const grants = new Float64Array(n)
  let total = 0
  switch (p.algorithm) {
    case 'none':
      grants.set(p.wants)
      for (let i = 0; i < n; i++) total += grants[i]!
      break
    case 'static':
      for (let i = 0; i < n; i++) {
        const g = p.wants[i]! < p.capacity ? p.wants[i]! : p.capacity
        grants[i] = g
        total += g
      }
      break
    case 'fair-share':
      total = layered(p, waterFill, grants)
      break
    case 'proportional-share':
      total = layered(p, proportionalShare, grants)
      break
  }
  return { ids: p.ids, grants, total }
}

function layered(p: NormalisedProblem, rule: ShareRule, out: Float64Array): number {
  if (p.ids.length === 0) return 0
  const capRoom = p.tenantCaps.slice()
  let available = p.capacity
  let total = 0
  for (const band of priorityBands(p)) {
    const given = shareBand(p, rule, band, band.length, available, capRoom, out)
    total += given
    available = Math.max(0, available - given)
  }
  if (p.surplus === 'spread' && available > 0) total += spreadSurplus(p, available, capRoom, out)
  return total
}

/** The grants of an allocation as a plain `{ id: grant }` record. */
export function grantsById(allocation: Allocation): Record<string, number> {
  const result: Record<string, number> = {}
  for (let i = 0; i < allocation.ids.length; i++) result[allocation.ids[i]!] = allocation.grants[i]!
  return result
}
