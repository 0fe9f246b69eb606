import type { ResourceState } from './entry.js'
import { send } from './lease-out.js'
import type { PoolState } from './state.js'

/**
 * Grants what free capacity allows to the clients whose target is above
 * their lease, first come first served. `partial`: a client may get part
 * of its increase (a round, after which nothing more is expected soon).
 * Without it (as acks and releases free capacity), only whole increases
 * go out: a round's decreases are acknowledged within a round trip, and
 * granting each ack's sliver at once sent a client several leases for one
 * increase (docs/benchmarks.md, Noisy demand under contention: at 10,000
 * clients the coordinator saturated). What acks cannot complete goes out
 * in part shortly after (`Pool.takeWaiting`).
 */
export function grantIncreases(
  pool: PoolState,
  r: ResourceState,
  nowMs: number,
  partial: boolean,
): void {
  if (r.starved.size === 0) return
  const eps = r.epsilon
  // A quota's budget in force: its capacity, and what a reset gave back in this window.
  let free = r.settings.capacity + r.resetUnits(pool.windowOf(r, nowMs)?.index) - r.committedSum
  for (const e of r.starved) {
    if (!e.client.connected || e.target <= e.newest + eps) {
      r.unstarve(e)
      continue
    }
    if (free <= eps) break
    // The new lease may raise this client's committed from e.committed to at most e.committed + free.
    const grant = Math.min(e.target, e.committed + free)
    if (grant <= e.newest + eps || (!partial && grant < e.target - eps)) continue
    const before = e.committed
    send(pool, e, grant, nowMs)
    free -= e.committed - before
    if (grant >= e.target - eps) r.unstarve(e)
  }
  if (!partial && free > eps && r.starved.size > 0) pool.waiting.add(r.settings.id)
}
