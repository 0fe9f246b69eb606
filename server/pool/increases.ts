import type { Entry, ResourceState } from './entry.js'
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
    if (grant <= e.newest + eps || ((!partial || wholeFirst(e, nowMs)) && grant < e.target - eps))
      continue
    const before = e.committed
    send(pool, e, grant, nowMs)
    free -= e.committed - before
    if (grant >= e.target - eps) r.unstarve(e)
  }
  if (!partial && free > eps && r.starved.size > 0) pool.waiting.add(r.settings.id)
}

/**
 * A rate family's first share goes whole for `wholeFirstShareMs` after a round found its holder
 * waiting for it: the falls made for it give what they held as they are acknowledged
 * (fall-gifts.ts), and only a first share takes those gifts. Granted in part, the first sliver
 * freed (a rounding's rest, one fall of twenty acknowledged) was the holder's first share: it
 * took that one fall's gift, and the rest of its share rose later with no tokens, every key new
 * to it starting empty (#41: 30 gateways starting together, the coordinator's part first held
 * 0.45% of the family, then all of it from under half a token a key; one start in three admitted 92-95%
 * of the first checks the central limiter admits, 99.4% otherwise). Past that time (a fall not
 * acknowledged: a client stalled), in part as any.
 */
function wholeFirst(e: Entry, nowMs: number): boolean {
  // Set only for a rate family's share (shapes/family-share.ts, with its burst slack).
  return !e.everHeld && e.joinedAtMs !== undefined && nowMs - e.joinedAtMs < wholeFirstShareMs
}

/** How long a rate family's first share waits to go whole (`wholeFirst`). */
const wholeFirstShareMs = 1000
