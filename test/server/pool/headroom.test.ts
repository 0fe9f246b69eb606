import { describe, expect, it } from 'vitest'
import type { ResourceSettings } from '../../../server/config/index.js'
import { Pool, type LeaseBatch } from '../../../server/pool/index.js'
import { resourceSettings } from '../../helpers/settings.js'

/**
 * Surplus spread with a headroom tolerance: a lease that covers its
 * client's demand stays while its target moves by little and no client
 * needs capacity; otherwise every change goes out as computed.
 */

const spread = (headroomTolerance: number, capacity = 1000): ResourceSettings =>
  resourceSettings({ id: 'api', capacity, burst: capacity, surplus: 'spread', headroomTolerance })

function setup(settings: ResourceSettings) {
  const table = new Map([[settings.id, settings]])
  const pool = new Pool(0, (id) => table.get(id))
  return { pool, table }
}

function capacities(batches: readonly LeaseBatch[]): Record<string, number> {
  const out: Record<string, number> = {}
  for (const b of batches) for (const l of b.leases) out[b.clientKey] = l.capacity
  return out
}

/** Two clients a and b, each wanting 100 of 1000: leased 500 each, acknowledged. */
function twoClients(settings: ResourceSettings) {
  const { pool, table } = setup(settings)
  let nowMs = 0
  for (const c of ['a', 'b']) {
    pool.connect(c, c, undefined, `inst-${c}-0001`, nowMs)
    pool.reportDemand(c, [{ resource: 'api', wants: 100 }], nowMs)
  }
  const ackAll = (batches: readonly LeaseBatch[]): void => {
    for (const b of batches) pool.acknowledge(b.clientKey, b.seq, undefined, nowMs)
  }
  const first = pool.round('api', nowMs)
  expect(capacities(first)).toEqual({ a: 500, b: 500 })
  ackAll(first)
  /** The next round after both report (a `a`, b `b`), 10 ms later. */
  const next = (a: number, b: number): readonly LeaseBatch[] => {
    nowMs += 10
    pool.reportDemand('a', [{ resource: 'api', wants: a }], nowMs)
    pool.reportDemand('b', [{ resource: 'api', wants: b }], nowMs)
    return pool.round('api', nowMs)
  }
  return { pool, table, next, now: () => nowMs }
}

describe('surplus spread: headroom tolerance', () => {
  it('leaves leases alone when demand moves within them and targets move by less than the tolerance', () => {
    const { next, pool } = twoClients(spread(0.1))
    // Targets 515 and 485: 3% from the leases, and a's 130 fits its 500.
    expect(next(130, 100)).toEqual([])
    expect(next(90, 120)).toEqual([])
    expect(pool.committed('api', 30)).toBe(1000)
  })

  it('sends every move with a tolerance of 0', () => {
    const { next } = twoClients(spread(0))
    // The decrease first; the increase follows on its ack.
    expect(capacities(next(130, 100))).toEqual({ b: 485 })
  })

  it('sends a move larger than the tolerance', () => {
    const { next, pool, now } = twoClients(spread(0.1))
    // a 250, b 100: targets 575 and 425, 15% away. The decrease first…
    const cut = next(250, 100)
    expect(capacities(cut)).toEqual({ b: 425 })
    // … and the increase once its ack frees the capacity.
    expect(capacities(pool.acknowledge('b', cut[0]!.seq, undefined, now()))).toEqual({ a: 575 })
  })

  it('rebalances exactly as soon as a client needs capacity the pool does not have free', () => {
    const { next } = twoClients(spread(0.1))
    for (let i = 0; i < 2; i++) next(480, 480) // targets 500 and 500: nothing moves
    // a wants 505, above its 500: targets 512.5 and 487.5, both within 10%, but a needs 12.5
    // and nothing is free, so b's decrease goes out (the increase follows on its ack).
    expect(capacities(next(505, 480))).toEqual({ b: 487.5 })
  })

  it('never keeps a lease below its client demand, even within the tolerance', () => {
    const { next, table, pool, now } = twoClients(spread(0.1))
    for (let i = 0; i < 2; i++) next(480, 480) // targets 500 and 500: nothing moves
    // Capacity 1030: 30 free. a wants 505 (above its 500): targets 527.5 and 502.5; a's
    // shortfall of 27.5 fits in what is free, so b's small move is kept and a gets its target.
    table.set('api', spread(0.1, 1030))
    pool.refreshSettings('api')
    expect(capacities(next(505, 480))).toEqual({ a: 527.5 })
    expect(pool.committed('api', now())).toBe(1027.5)
  })

  it('does not keep a lease above its target when another target needs what it holds (a kept at 27 left d at 0 against its 0.5)', () => {
    // 26.5 / 53 = 0.5: a's lease of 27 is just within the tolerance of its target 26.5.
    const { pool } = setup(spread(1 / 53, 27))
    pool.connect('a', 'a', undefined, 'inst-a-0001', 0)
    pool.reportDemand('a', [{ resource: 'api', wants: 26 }], 0)
    const first = pool.round('api', 0)
    expect(capacities(first)).toEqual({ a: 27 })
    pool.acknowledge('a', first[0]!.seq, undefined, 0)
    pool.connect('d', 'd', undefined, 'inst-d-0001', 10)
    pool.reportDemand('d', [{ resource: 'api', wants: 0 }], 10)
    pool.reportDemand('a', [{ resource: 'api', wants: 26 }], 10)
    // Targets 26.5 and 0.5: a's decrease goes out, and d learns where it stands (0 for now).
    const cut = pool.round('api', 10)
    expect(capacities(cut)).toEqual({ a: 26.5, d: 0 })
    const toA = cut.find((b) => b.clientKey === 'a')!
    expect(capacities(pool.acknowledge('a', toA.seq, undefined, 20))).toEqual({ d: 0.5 })
  })
})
