import type { Counter } from 'prom-client'
import type { Usage } from '../../shared/index.js'

/** The columns of a series' row: the four usage counters, in this order. */
export const usageColumns = ['admitted', 'refused', 'admittedCalls', 'refusedCalls'] as const
export type UsageColumn = (typeof usageColumns)[number]

/** The label of the resources past the bound on series. */
export const otherResource = '_other'

/**
 * What clients reported they admitted and refused, summed per resource and
 * tenant until the counters are scraped. A report adds into a row of four
 * numbers found through two map look-ups with the strings it already holds,
 * so it allocates nothing; prom-client's `inc(labels, n)` builds a label
 * object and a hash string per call, which at 10k reports a second made a
 * tenth of the coordinator's garbage (docs/benchmarks.md). At most
 * `maxSeries` (resource, tenant) pairs get a row of their own; the rest
 * count under the resource `_other`.
 */
export class UsageTotals {
  readonly #rows = new Map<string, Map<string, Float64Array>>()
  readonly #maxSeries: () => number
  #series = 0

  constructor(maxSeries: () => number) {
    this.#maxSeries = maxSeries
  }

  add(resource: string, tenant: string | undefined, usage: Usage): void {
    const row = this.#row(resource, tenant ?? '')
    row[0]! += usage.admitted
    row[1]! += usage.refused
    row[2]! += usage.admittedCalls
    row[3]! += usage.refusedCalls
  }

  /** Hands one column's sums to its counter and zeroes them (a counter's collect calls it). */
  flush(column: UsageColumn, counter: Counter<'resource' | 'tenant'>): void {
    const c = usageColumns.indexOf(column)
    for (const [resource, byTenant] of this.#rows)
      for (const [tenant, row] of byTenant) {
        const n = row[c]!
        // Each label set appears once counted, even at 0, so a scrape shows every series.
        counter.inc({ resource, tenant }, n)
        row[c] = 0
      }
  }

  #row(resource: string, tenant: string): Float64Array {
    const found = this.#rows.get(resource)?.get(tenant)
    if (found !== undefined) return found
    if (resource !== otherResource && this.#series >= this.#maxSeries())
      return this.#row(otherResource, tenant)
    let byTenant = this.#rows.get(resource)
    if (byTenant === undefined)
      this.#rows.set(resource, (byTenant = new Map<string, Float64Array>()))
    const row = new Float64Array(usageColumns.length)
    byTenant.set(tenant, row)
    // `_other` has a row per tenant, bounded by the configured tenants.
    if (resource !== otherResource) this.#series++
    return row
  }
}
