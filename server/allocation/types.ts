/** How a resource's capacity is shared among its clients. */
export const algorithms = ['fair-share', 'proportional-share', 'static', 'none'] as const
export type Algorithm = (typeof algorithms)[number]

/** What happens to capacity left over when total demand is below it. */
export const surplusPolicies = ['spread', 'hold'] as const
export type SurplusPolicy = (typeof surplusPolicies)[number]

/** What an allocation (and a resource template) uses unless told: exact weighted max-min… */
export const defaultAlgorithm: Algorithm = 'fair-share'
/** …with the unused capacity spread as headroom. */
export const defaultSurplus: SurplusPolicy = 'spread'

export interface TenantSpec {
  /** Share of a band's capacity relative to other tenants; default 1, in [1e-6, 1e6]. */
  readonly weight?: number | undefined
  /** Most this tenant may hold of the resource, across all priority bands (resource units). */
  readonly cap?: number | undefined
}

export interface ClientDemand {
  /** Unique within one allocation. */
  readonly id: string
  /** Demand in the resource's unit (tokens/s or slots), ≥ 0. */
  readonly wants: number
  /** Share relative to peers of the same tenant; default 1, in [1e-6, 1e6]. */
  readonly weight?: number | undefined
  /** Integer band; higher is served first; default 0. */
  readonly priority?: number | undefined
  /** A key of `tenants`; absent: the implicit tenant (weight 1, no cap). */
  readonly tenant?: string | undefined
}

export interface AllocationProblem {
  /** Capacity of the resource (per client for `static`), ≥ 0. */
  readonly capacity: number
  /** Default `fair-share`. */
  readonly algorithm?: Algorithm | undefined
  /** Default `spread`. */
  readonly surplus?: SurplusPolicy | undefined
  readonly tenants?: Readonly<Record<string, TenantSpec>> | undefined
  readonly clients: readonly ClientDemand[]
}

export interface Allocation {
  /** Client ids, in input order. */
  readonly ids: readonly string[]
  /** `grants[i]` is the grant of `ids[i]`, in the resource's unit. */
  readonly grants: Float64Array
  /** Sum of all grants. */
  readonly total: number
}

/**
 * A sharing rule over one group of claimants (clients, or tenants): reads
 * `demand[i]` and `weight[i]` for `i` in `members[0..count)`, writes
 * `out[i]`, and returns the total written. Never grants more than `capacity`
 * in total, nor more than `demand[i]` to anyone.
 */
export type ShareRule = (
  demand: Float64Array,
  weight: Float64Array,
  members: Int32Array,
  count: number,
  capacity: number,
  out: Float64Array,
) => number
