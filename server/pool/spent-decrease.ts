import type { Entry } from './entry.js'
import { send } from './lease-out.js'
import type { PoolState } from './state.js'

/**
 * A quota's decrease its client cannot acknowledge: it says it has used more of the window
 * than the decrease leaves it (the decrease was sized on an older report, and it spent on
 * meanwhile). Used counts only grow within a window, so no later ack can come; until one does,
 * the rest of what it was leased counts as held and nobody else may have it. It gets what it
 * reports used, at most what it is committed, which it acknowledges once it has spent no more.
 *
 * Sent when the report that shows it arrives (clients.ts), and by a round for a client silent
 * since its decrease (rounds.ts). Waiting a refresh period for the round stranded the rest at
 * a window's end: a hot named quota's gateway cut to 291 after using 305 held 365 to the end,
 * 60 of the window's 1,000 admitted nowhere (#41, docs/benchmarks.md). Safe either way: the
 * lease is no more than what it is committed, and what it frees is freed only on its ack.
 */
export function offerSpent(pool: PoolState, e: Entry, nowMs: number): boolean {
  const r = e.resource
  // Called with every quota report: the window is looked up only for a decrease spent past.
  const newest = e.newest
  if (e.used <= newest + r.epsilon || e.committed <= newest + r.epsilon) return false
  const window = pool.windowOf(r, nowMs)
  if (window === undefined || e.usedWindow !== window.index) return false
  send(pool, e, Math.min(e.committed, e.used), nowMs)
  return true
}
