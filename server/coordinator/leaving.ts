import type { LeaseBatch } from '../pool/index.js'

/**
 * A lease batch leaves `waitedMs` after its leases were made (its ledger write, and the write
 * before it), `lateMs` of that past `server.ledgerMaxWriteMs`. What counts from the making is
 * made to count from now, in one place:
 *
 * - a lease's life (`ttlMs`), counted from receipt: the pool holds it until the making +
 *   `ledgerMaxWriteMs` + `ttlMs` + `graceMs`, so it loses what is late, and ends where a lease
 *   sent at the limit would;
 * - a quota window's end from receipt (`window.endsInMs`, what a client that places no edge
 *   from its report spends to, `windowGraceMs` early) loses all the batch waited: it is a fixed
 *   instant, and the grace is for the one-way delay, not a ledger write of up to
 *   `ledgerMaxWriteMs` (500 ms by default, twice the grace) as well;
 * - a next window sent ahead (server/pool/ahead.ts) opens, and ends, all it waited sooner after
 *   it comes (late by its wait, a client's next window opened 10–15 ms after the edge on a file
 *   ledger: docs/benchmarks.md); its start by whole ms only, so never before it opens (the
 *   windows' slew is on the time still to come only: lease-out.ts, `nextPart`).
 *
 * Ends placed from the client's own report (`edge`) need nothing: a report's time is not the
 * batch's. False, and nothing changed, when some lease would have no life left: the batch is
 * not sent.
 */
export function leaveAfter(batch: LeaseBatch, waitedMs: number, lateMs: number): boolean {
  const lateByMs = lateMs > 0 ? Math.ceil(lateMs) : 0
  if (lateByMs > 0)
    for (const lease of batch.leases) if (lease.ttlMs > 0 && lease.ttlMs <= lateByMs) return false
  const waited = waitedMs >= 1
  for (const lease of batch.leases) {
    if (lateByMs > 0 && lease.ttlMs > 0) lease.ttlMs -= lateByMs
    const window = lease.window
    if (window === undefined || !waited) continue
    window.endsInMs = Math.max(0, window.endsInMs - Math.ceil(waitedMs))
    const next = window.next
    if (next === undefined) continue
    next.startsInMs = Math.max(0, next.startsInMs - Math.floor(waitedMs))
    next.endsInMs = Math.max(0, next.endsInMs - Math.ceil(waitedMs))
  }
  return true
}
