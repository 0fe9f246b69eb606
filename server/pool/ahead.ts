import { windowOfIndex } from '../config/index.js'
import type { Entry, ResourceState } from './entry.js'
import type { PoolState } from './state.js'

/**
 * A quota's next window sent ahead (#41: at each edge the leases of the window ending
 * stopped a few ms early, and those of the next came with its first round, 5–15 ms after the
 * edge and once 74; checks of budgets nobody came close to spending were refused between).
 *
 * With the leases sent again before the window's end (edge-renewal.ts), each client gets its
 * block of the next window, sized as the next window's first round would size it (every unit
 * of it left), and spends it from the window's start as its own clock places it (no sooner:
 * lease-out.ts, `nextPart`). The pool counts that block against the next window from the
 * moment it is sent, and against the one ending too (an entry commits the larger of its lease
 * and its block ahead: never less than either window needs, at the cost of a few ms of the
 * ending window's budget); the ledger keeps it with the entry, so a coordinator restarted before
 * the edge counts it too. Once the next window is in force, the block is the entry's newest lease
 * (`Entry.promoteAhead`), and its rounds go on from there.
 *
 * A keyed quota's default share goes ahead the same way (#41: keys nobody came close to
 * spending were refused in the 250 ms either side of each edge, 0.18% of the checks within 5 s
 * of one): each holder's share of the next window is its share of this one
 * (shapes/keyed-quota-share.ts), spent of every key not leased on its own. A hot key's holders
 * spend none of it: they wait for the key's lease of that window, which comes with the first
 * round there (the share's lease sent again: rounds.ts, lease-out.ts `send`); a key that goes
 * hot while a share is ahead counts it in its own entry (hot-keys.ts, `seedKey`).
 */

/**
 * Sizes and records the blocks of the window after `window` for `entries` (connected clients
 * whose leases are about to be sent again), out of what the blocks already sent ahead for it
 * leave. Returns whether any was recorded.
 */
export function planAhead(
  pool: PoolState,
  r: ResourceState,
  window: { readonly index: number; readonly endMs: number; readonly nextMs?: number },
  entries: readonly Entry[],
  nowMs: number,
): boolean {
  const spec = r.settings.quotaWindow
  const nextBlocks = r.shape.nextBlocks
  if (nextBlocks === undefined || spec === undefined || entries.length === 0) return false
  // Placed from the window in force, not asked of the windows' clock at a time to come (it takes
  // a window asked for as one it has reached: every lease after would be of the next window).
  // It opens when the windows' clock says, and ends a window's length after this one ends: when
  // that clock trails the wall clock (a restart's downtime being slewed away), this one's end is
  // placed on the wall clock, and the next must not outlast its own wall-clock end either
  // (found by the simulator: 4 units over a budget of 30,000 after a coordinator's restart).
  const after = windowOfIndex(spec, window.index + 1)
  const startMs = window.nextMs ?? window.endMs
  const endMs = window.endMs + (after.endMs - after.startMs)
  if (!(endMs > startMs)) return false
  const next = { index: after.index, startMs, endMs }
  let sent = 0
  const fresh: Entry[] = []
  for (const e of r.entries.values()) if (e.ahead?.window === next.index) sent += e.ahead.capacity
  for (const e of entries) if (e.ahead?.window !== next.index) fresh.push(e)
  const left = Math.max(0, r.settings.capacity - sent)
  if (fresh.length === 0 || left <= 0) return false
  const blocks = nextBlocks(r, fresh, next, left, nowMs)
  let any = false
  for (let i = 0; i < fresh.length; i++) {
    const capacity = blocks[i]!
    if (capacity <= 0) continue
    fresh[i]!.ahead = {
      window: next.index,
      capacity,
      startMs: next.startMs,
      endMs: next.endMs,
      // Counted as a lease sent now is: to its end, and the send delay (a ledger write first).
      holdUntilMs: next.endMs + pool.sendDelayMs,
    }
    fresh[i]!.refresh(nowMs)
    any = true
  }
  return any
}

/**
 * A block sent ahead becomes `entry`'s newest lease once its window is in force (or goes, once
 * past): marked for the ledger's next write. Returns whether it became a lease.
 */
export function promoteDue(pool: PoolState, entry: Entry, nowMs: number): boolean {
  if (entry.ahead === undefined) return false
  const w = pool.windowOf(entry.resource, nowMs)
  if (w === undefined) return false
  const leased = entry.promoteAhead(w.index, entry.resource.settings.graceMs, nowMs)
  if (entry.ahead === undefined) pool.touch(entry)
  return leased
}
