import { planAhead } from './ahead.js'
import type { Entry, ResourceState } from './entry.js'
import { send, sendOne } from './lease-out.js'
import type { PoolState } from './state.js'

/**
 * How long before a quota window's end its leases are sent again, ms: each then places the
 * window's end from the client's report that came soonest (`ClientState.edgeReport`) with only what is still to come exposed to the
 * windows' slew (lease-out.ts, `windowEdge`), 1.1% of this (1 ms) rather than of the time since
 * the lease was last sent (up to a window). Long enough for the lease to arrive before the end
 * it replaces on any network a quota is used over; measured in docs/benchmarks.md.
 */
export const edgeRenewalMs = 100

/**
 * Sends again, unchanged, the quota leases of `resourceId` in force for the window that ends
 * soon, so that each says the window's end anew (its `edge`): each entry's newest lease goes
 * again with the same capacity, to a client that is connected and acknowledged it, unless it
 * reported that lease spent. A quota's carry each client's part of the next window
 * (ahead.ts: the one allocation here), and go to a client whose lease is spent too (the block
 * is of the next window). It costs one batch per client per window, with every such lease it
 * holds (a keyed family's hot keys too: about what the round at the edge sends). An entry whose
 * client must hear every lease again (a new connection) is left to the next round, which sends
 * its family's hot keys' leases with it (lease-out.ts). Its batches are left for the caller's
 * flush.
 */
export function renewEdges(pool: PoolState, resourceId: string, nowMs: number): void {
  const r = pool.resources.get(resourceId)
  if (r === undefined || nowMs < r.learningUntilMs) return
  const window = pool.windowOf(r, nowMs)
  // Past its end (the windows' clock trailing the wall clock ends a window early): nothing to renew.
  if (window === undefined || nowMs >= window.endMs) return
  const renewing: Entry[] = []
  for (const e of r.entries.values()) if (renewable(e, window.index)) renewing.push(e)
  r.renewedWindow = window.index
  renew(pool, r, window, renewing, nowMs)
}

/**
 * `entry`'s lease was acknowledged: if its window's leases were sent again before its end
 * while this one waited for the ack (a decrease or a grant in flight then), it goes again now,
 * with its block of the next window. Left out, the client had no block of the next window and
 * refused at the edge until the round there (CI: 2 of 3 processes held one 5 ms before an edge).
 */
export function renewLate(pool: PoolState, entry: Entry, nowMs: number): void {
  const r = entry.resource
  if (
    entry.leaseWindow !== r.renewedWindow ||
    entry.renewedWindow === r.renewedWindow ||
    !renewable(entry, r.renewedWindow)
  )
    return
  const window = pool.windowOf(r, nowMs)
  if (window === undefined || window.index !== r.renewedWindow || nowMs >= window.endMs) return
  renew(pool, r, window, [entry], nowMs)
}

/** Whether `e`'s newest lease, of window `index`, may be sent again as it is. */
function renewable(e: Entry, index: number): boolean {
  const last = e.leases.at(-1)
  return (
    e.client.connected &&
    !e.resendDue &&
    e.leaseWindow === index &&
    last?.acked === true &&
    e.newest === last.capacity
  )
}

function renew(
  pool: PoolState,
  r: ResourceState,
  window: NonNullable<ReturnType<PoolState['windowOf']>>,
  renewing: readonly Entry[],
  nowMs: number,
): void {
  // A quota's (named, or a keyed family's share): each with its part of the next window
  // (ahead.ts), spent or not.
  const ahead = planAhead(pool, r, window, renewing, nowMs)
  for (const e of renewing) {
    e.renewedWindow = window.index
    const last = e.leases.at(-1)!
    const spent = last.capacity <= 0 || (e.usedWindow === window.index && e.used >= last.capacity)
    if (spent && !(ahead && e.ahead !== undefined)) continue
    // A family's share of this window that came ahead (its block promoted: ahead.ts) was never
    // sent as a lease of the window, so this is its first: it carries the leases of the
    // family's hot keys (lease-out.ts), or the holder would take its default share of a key
    // leased on its own in the window (found by the keyed quota model: 13 of 12, a holder whose
    // block ahead was lost, renewed here with no lease of 0 for a key leased to another whole).
    if (r.shape.familyShare && last === e.promoted) send(pool, e, last.capacity, nowMs)
    else sendOne(pool, e, last.capacity, nowMs)
  }
}
