import type { Entry, ResourceState } from '../entry.js'
import { grantIncreases } from '../increases.js'
import { send } from '../lease-out.js'
import type { PoolState } from '../state.js'

/**
 * What a kind of resource does in a round: how it sets its clients' targets
 * (max-min over demand, a family's default split, a quota's blocks, ...)
 * and whether it is a family's own resource or one of its keys. A
 * resource's shape is chosen once, from its settings, when its state is
 * made (`shapeOf`, index.ts): the pool asks the shape, and never compares a
 * kind or a role. A new shape is a new file here, and a line in index.ts.
 */
export interface Shape {
  /** For status and tests. */
  readonly name: string
  /** A keyed family's own resource: its leases are default shares, and carry the hot keys'. */
  readonly familyShare: boolean
  /** One key of a keyed family: seeded when it goes hot, sent back to the default when cold. */
  readonly hotKey: boolean
  /**
   * A quota whose leases sent again before the window's end carry each client's part of the
   * next window (ahead.ts), spent from the window's start without waiting for its round: the
   * parts of `entries` (clients whose leases are about to be sent again) out of `left` (what
   * the parts already sent ahead leave). Undefined for a shape that sends nothing ahead.
   */
  readonly nextBlocks:
    | ((
        r: ResourceState,
        entries: readonly Entry[],
        next: { readonly startMs: number; readonly endMs: number },
        left: number,
        nowMs: number,
      ) => ArrayLike<number>)
    | undefined
  /**
   * One round, once the pool has swept, checked learning and set apart what
   * silent clients hold (`reserved`): the targets of `sharing` (the connected
   * clients not holding back an ack), and the leases that follow from them.
   */
  round(
    pool: PoolState,
    r: ResourceState,
    sharing: readonly Entry[],
    reserved: number,
    nowMs: number,
  ): void
}

/**
 * The end of a round, the same for every shape that may lower a lease:
 * decreases are pushed at once (freeing capacity only on ack or lapse),
 * increases granted out of what is free, and a client with no lease yet
 * learns where it stands at once, even at 0 while it waits for free
 * capacity (it gets the lease's parameters, safe capacity and refresh,
 * instead of guessing).
 */
export function settle(
  pool: PoolState,
  r: ResourceState,
  sharing: readonly Entry[],
  nowMs: number,
): void {
  const eps = r.epsilon
  for (const e of sharing) if (e.target < e.newest - eps) send(pool, e, e.target, nowMs)
  r.clearStarved()
  for (const e of sharing) if (e.target > e.newest + eps) r.starve(e)
  grantIncreases(pool, r, nowMs, true)
  for (const e of sharing) if (e.leases.length === 0) send(pool, e, 0, nowMs)
}

/** The tenant a client's demand counts under for `r`: its own, when `r` knows it. */
export function tenantOf(r: ResourceState, e: Entry): string | undefined {
  const tenant = e.client.tenant
  return tenant !== undefined && Object.hasOwn(r.settings.tenants, tenant) ? tenant : undefined
}
