import { describe, expect, it } from 'vitest'
import { Pool, type LeaseBatch } from '../../../server/pool/index.js'
import { resourceSettings } from '../../helpers/settings.js'

/**
 * A quota lease is of its window: what it let a client spend there is no part of the next
 * window's budget, which is shared out anew (blocks sent ahead, then the rounds). Found by a
 * keyed quota over 30 gateways (k0 at 101 and 102 of 100 in one window): a gateway's lease of
 * a window ended, renewed with its report just after the edge, went out as a lease of the new
 * window while the coordinator's part held all of that window's budget, sent ahead.
 *
 * Defaults as a user gets them: a lapsed lease's fallback is held `safeHoldMs`, so what the
 * pool counted the client holding just after an edge is its lease of the window before.
 */
const capacity = 1000
const settings = resourceSettings({
  id: 'q',
  kind: 'quota',
  capacity,
  burst: capacity,
  refreshMs: 1000,
  leaseTtlMs: 5000,
  safeHoldMs: 2500,
  quotaWindow: { kind: 'fixed', ms: 60_000 },
})

/**
 * Client `a` asks for far more than the quota, `b` spent 3 units early in the first window and
 * asks nothing since, to 59 s; then the leases sent again before the edge: `a`'s block of the
 * next window is all of it, `b`'s none (every unit went to the one asking).
 */
function beforeEdge(): { pool: Pool; ackAll: (b: readonly LeaseBatch[], t: number) => void } {
  const pool = new Pool(0, () => settings, { learn: false })
  for (const key of ['a', 'b']) pool.connect(key, key, undefined, `inst-${key}`, 0)
  const ackAll = (batches: readonly LeaseBatch[], t: number): void => {
    for (const b of batches) pool.acknowledge(b.clientKey, b.seq, undefined, t)
  }
  let n = 0
  for (let t = 0; t <= 59_000; t += 1000) {
    n++
    ackAll(pool.reportDemand('a', [{ resource: 'q', wants: 100_000, window: 0 }], t, n).batches, t)
    const b = t < 3000 ? { wants: 1, used: t / 1000 } : { wants: 0, used: 3 }
    ackAll(pool.reportDemand('b', [{ resource: 'q', ...b, window: 0 }], t, n).batches, t)
    ackAll(pool.round('q', t), t)
  }
  const edge = pool.renewEdges(['q'], 59_900)
  const next = (key: string): number | undefined =>
    edge.find((x) => x.clientKey === key)?.leases[0]?.window?.next?.capacity
  expect(next('a')).toBe(capacity)
  expect(next('b') ?? 0).toBe(0)
  expect(pool.committedBy('b', 'q', 59_900)).toBeGreaterThan(0)
  ackAll(edge, 59_900)
  return { pool, ackAll }
}

/** What the leases of window 1 in `batches` give each client. */
function leasesOfWindow(batches: readonly LeaseBatch[], index: number): Map<string, number> {
  const out = new Map<string, number>()
  for (const b of batches)
    for (const l of b.leases) if (l.window?.index === index) out.set(b.clientKey, l.capacity)
  return out
}

describe('a quota lease of a window that has ended', () => {
  it('is not renewed into the next window by its client’s report', () => {
    const { pool } = beforeEdge()
    // `b` reports 100 ms after the edge: its lease (sent at 59.9 s, to the window's end) is due.
    const after = pool.reportDemand('b', [{ resource: 'q', wants: 0, window: 0 }], 60_100, 99)
    expect(leasesOfWindow(after.batches, 1).get('b') ?? 0).toBe(0)
  })

  it('is not carried into the next window by the edge’s round: what the round gives comes from what is free', () => {
    const { pool } = beforeEdge()
    // What each client may spend of window 1: `a` its block sent ahead (1,000) until it
    // acknowledges a lease of the window, which it does only from 63 s; `b` its newest lease of it.
    const may = new Map([['a', capacity]])
    const heldForA: LeaseBatch[] = []
    const deliver = (batches: readonly LeaseBatch[], t: number): void => {
      for (const b of batches) {
        if (b.clientKey === 'a' && t < 63_000) {
          heldForA.push(b)
          continue
        }
        for (const l of b.leases) if (l.window?.index === 1) may.set(b.clientKey, l.capacity)
        deliver(pool.acknowledge(b.clientKey, b.seq, undefined, t), t)
      }
    }
    let gotB = 0
    for (let t = 60_000; t <= 66_000; t += 250) {
      if (t >= 63_000) deliver(heldForA.splice(0), t)
      // `b` asks again, a unit a second.
      deliver(
        pool.reportDemand('b', [{ resource: 'q', wants: 1, window: 1 }], t + 50, 100 + t).batches,
        t,
      )
      deliver(pool.round('q', t + 100), t)
      deliver(pool.grantWaiting('q', t + 150), t)
      expect((may.get('a') ?? 0) + (may.get('b') ?? 0)).toBeLessThanOrEqual(capacity)
      gotB = Math.max(gotB, may.get('b') ?? 0)
    }
    // Once `a` acknowledged its cut, `b` has a block of the window.
    expect(gotB).toBeGreaterThan(0)
  })
})
