import { describe, expect, it } from 'vitest'
import { Pool, type LeaseBatch } from '../../../server/pool/index.js'
import { windowEdge } from '../../../server/pool/lease-out.js'
import { quotaSettings } from '../../helpers/settings.js'

/**
 * A quota window's end as a lease places it (`edge`, measured from the client's newest report),
 * and the leases sent again just before the end so that each places it anew (#41: a keyed quota
 * nobody spends was refused from ~6 ms before each edge).
 */

const settings = quotaSettings()

describe('a quota window’s edge', () => {
  it('exposes only the time still to come to the windows’ slew; the time since the report, to the clocks’ drift', () => {
    // Report 3 handled at 1 s, the window ending at 3 s, the lease made at 2 s: 0.1% of the
    // second past, 1.1% of the one to come, and 1 ms.
    expect(windowEdge({ n: 3, atMs: 1000 }, 3000, 2000)).toEqual({ edge: [3, 1987] })
    // Made at the report: all of it to come (2 s, 1.1%).
    expect(windowEdge({ n: 3, atMs: 1000 }, 3000, 1000)).toEqual({ edge: [3, 1977] })
    // Made 100 ms before the end, the report 900 ms old: the end placed 3 ms early.
    expect(windowEdge({ n: 4, atMs: 59_000 }, 60_000, 59_900)).toEqual({ edge: [4, 997] })
    // No numbered report: nothing (the lease's life from its receipt rules).
    expect(windowEdge(undefined, 3000, 2000)).toEqual({})
  })

  it('sends the leases in force again, unchanged, to acknowledging clients, each placing the end anew', () => {
    const pool = new Pool(0, () => settings, { learn: false })
    for (const key of ['a', 'b', 'c']) pool.connect(key, key, undefined, `inst-${key}`, 0)
    const held = new Map<string, number>()
    const ack = (batches: readonly LeaseBatch[], t: number, but: string) => {
      for (const b of batches) {
        for (const l of b.leases) held.set(b.clientKey, l.capacity)
        if (b.clientKey !== but) pool.acknowledge(b.clientKey, b.seq, undefined, t)
      }
    }
    let n = 0
    for (let t = 0; t <= 59_000; t += 1000) {
      n++
      for (const key of ['a', 'b', 'c'])
        ack(pool.reportDemand(key, [{ resource: 'q', wants: 1, window: 0 }], t, n).batches, t, 'c')
      // c never acknowledges: a lease of its on the way is left to the rounds.
      ack(pool.round('q', t), t, 'c')
    }
    pool.disconnect('b', 59_500)
    const renewed = pool.renewEdges(['q'], 59_900)
    // a alone: b is gone, c has a lease unacknowledged.
    expect(renewed.map((b) => b.clientKey)).toEqual(['a'])
    const lease = renewed[0]!.leases[0]!
    expect(lease.capacity).toBeGreaterThan(0)
    expect(lease.capacity).toBe(held.get('a'))
    // Its end from report n (handled at 59 s): 900 ms past, 100 ms to come.
    expect(lease.window?.edge).toEqual([n, 997])
    expect(lease.window?.index).toBe(0)
    // A lease reported spent to its end is not renewed: nothing is left to spend of it.
    pool.acknowledge('a', renewed[0]!.seq, undefined, 59_900)
    expect(pool.renewEdges(['q'], 59_910).map((b) => b.clientKey)).toEqual(['a'])
    for (const b of pool.renewEdges(['q'], 59_920)) pool.acknowledge('a', b.seq, undefined, 59_920)
    const spent = held.get('a')!
    const report = [{ resource: 'q', wants: 1, used: spent, window: 0 }]
    for (const b of pool.reportDemand('a', report, 59_950, n + 1).batches)
      pool.acknowledge(b.clientKey, b.seq, undefined, 59_950)
    expect(pool.renewEdges(['q'], 59_960)).toEqual([])
    // Past the window's end there is nothing to renew.
    expect(pool.renewEdges(['q'], 60_000)).toEqual([])
  })

  it('is measured from the recent report that came soonest, when the client says when it sent them', () => {
    const pool = new Pool(0, () => settings, { learn: false })
    pool.connect('a', 'a', undefined, 'inst-a', 0)
    const report = [{ resource: 'q', wants: 1, window: 0 }]
    let held: readonly LeaseBatch[] = []
    // Sent at 57, 58 and 59 s on the client's clock, handled 10, 2 and 8 ms later.
    for (const [n, sentMs, delayMs] of [
      [1, 57_000, 10],
      [2, 58_000, 2],
      [3, 59_000, 8],
    ] as const) {
      const t = sentMs + delayMs
      held = [
        ...pool.reportDemand('a', report, t, n, undefined, sentMs).batches,
        ...pool.round('q', t),
      ]
      for (const b of held) pool.acknowledge(b.clientKey, b.seq, undefined, t)
    }
    const lease = pool.renewEdges(['q'], 59_500)[0]!.leases[0]!
    // From report 2: 1,498 ms past, 500 to come: the client places the end at 58,000 + 1,990,
    // 10 ms before it (from report 3, the newest: 59,000 + 985, 15 ms before it).
    expect(lease.window?.edge).toEqual([2, 1990])
    // A client that does not say when it sent them: from the newest.
    const old = new Pool(0, () => settings, { learn: false })
    old.connect('a', 'a', undefined, 'inst-a', 0)
    for (const [n, atMs] of [
      [1, 57_010],
      [2, 58_002],
      [3, 59_008],
    ] as const)
      for (const b of [...old.reportDemand('a', report, atMs, n).batches, ...old.round('q', atMs)])
        old.acknowledge(b.clientKey, b.seq, undefined, atMs)
    expect(old.renewEdges(['q'], 59_500)[0]!.leases[0]!.window?.edge).toEqual([3, 985])
  })
})
