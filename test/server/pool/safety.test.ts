import { describe, expect, it } from 'vitest'
import type { ResourceSettings } from '../../../server/config/index.js'
import { Pool, type LeaseBatch } from '../../../server/pool/index.js'
import { resourceSettings } from '../../helpers/settings.js'

/**
 * Regression tests for the ways the capacity bound broke under real faults
 * (issue 12), each on the pool itself: the model test explores the
 * interleavings; these pin each defect down.
 */

const rate = resourceSettings({ id: 'api', capacity: 1000, burst: 1000 })
const slots = resourceSettings({ id: 'db', kind: 'concurrency', capacity: 10, burst: 10 })

function setup(settings: ResourceSettings[] = [rate, slots]) {
  const table = new Map(settings.map((s) => [s.id, s]))
  const pool = new Pool(0, (id) => table.get(id))
  return { pool, table }
}

function leaseOf(batches: readonly LeaseBatch[], resource: string) {
  for (const b of batches)
    for (const l of b.leases) if (l.resource === resource) return { seq: b.seq, ...l }
  return undefined
}

describe('pool safety', () => {
  it('does not let an ack of one resource cover a held-back concurrency decrease of another', () => {
    const { pool, table } = setup()
    pool.connect('c', 'c', undefined, 'inst-0001', 0)
    pool.reportDemand(
      'c',
      [
        { resource: 'api', wants: 1000 },
        { resource: 'db', wants: 10 },
      ],
      0,
    )
    const first = [...pool.round('api', 0), ...pool.round('db', 0)]
    for (const b of first) pool.acknowledge('c', b.seq, undefined, 0)
    expect(pool.committed('db', 0)).toBe(10)
    // db is cut to 5: the client has 10 in flight and holds its ack back.
    table.set('db', { ...slots, capacity: 5, burst: 5 })
    pool.refreshSettings('db')
    const cut = leaseOf(pool.round('db', 10), 'db')!
    expect(cut.capacity).toBe(5)
    // A later batch for api alone is acked at once.
    table.set('api', { ...rate, capacity: 800, burst: 800 })
    pool.refreshSettings('api')
    const apiBatch = pool.round('api', 20)
    expect(leaseOf(apiBatch, 'db')).toBeUndefined()
    pool.acknowledge('c', apiBatch[0]!.seq, undefined, 20)
    expect(pool.committed('db', 20)).toBe(10)
    // Only db's own ack, once drained, frees the difference.
    pool.acknowledge('c', cut.seq, ['db'], 30)
    expect(pool.committed('db', 30)).toBe(5)
  })

  it('acknowledges only the named resources of a batch', () => {
    const { pool, table } = setup()
    pool.connect('c', 'c', undefined, 'inst-0001', 0)
    pool.reportDemand(
      'c',
      [
        { resource: 'api', wants: 500 },
        { resource: 'db', wants: 10 },
      ],
      0,
    )
    for (const b of [...pool.round('api', 0), ...pool.round('db', 0)])
      pool.acknowledge('c', b.seq, undefined, 0)
    table.set('db', { ...slots, capacity: 4, burst: 4 })
    pool.refreshSettings('db')
    pool.round('db', 10)
    // A renewal carries both resources; the client acks api's lease but holds db's.
    const renewal = pool.reportDemand(
      'c',
      [
        { resource: 'api', wants: 500 },
        { resource: 'db', wants: 10 },
      ],
      500,
    ).batches
    expect(leaseOf(renewal, 'api')).toBeDefined()
    expect(leaseOf(renewal, 'db')!.capacity).toBe(4)
    pool.acknowledge('c', renewal[0]!.seq, ['api'], 500)
    expect(pool.committed('db', 500)).toBe(10)
  })

  it('keeps an unacknowledged concurrency decrease at the old size while the client is connected, and frees it a lease life after it goes', () => {
    const { pool, table } = setup([slots])
    pool.connect('c', 'c', undefined, 'inst-0001', 0)
    pool.reportDemand('c', [{ resource: 'db', wants: 10 }], 0)
    for (const b of pool.round('db', 0)) pool.acknowledge('c', b.seq, undefined, 0)
    table.set('db', { ...slots, capacity: 5, burst: 5 })
    pool.refreshSettings('db')
    pool.round('db', 10)
    // Far past ttl + grace (1200 ms): still connected, still draining.
    for (let t = 250; t <= 5000; t += 250) {
      pool.reportDemand('c', [{ resource: 'db', wants: 10 }], t)
      pool.round('db', t)
      expect(pool.committed('db', t), `at ${t} ms`).toBe(10)
    }
    pool.disconnect('c', 5000)
    expect(pool.committed('db', 5000 + 1199)).toBe(10)
    expect(pool.committed('db', 5000 + 1200 + 500)).toBe(0)
  })

  it('ignores an ack, on a new connection, of a batch lost with the old one', () => {
    const { pool, table } = setup()
    pool.connect('c', 'c', undefined, 'inst-0001', 0)
    pool.reportDemand(
      'c',
      [
        { resource: 'api', wants: 1000 },
        { resource: 'db', wants: 1 },
      ],
      0,
    )
    for (const b of [...pool.round('api', 0), ...pool.round('db', 0)])
      pool.acknowledge('c', b.seq, undefined, 0)
    expect(pool.committed('api', 0)).toBe(1000)
    table.set('api', { ...rate, capacity: 400, burst: 400 })
    pool.refreshSettings('api')
    const lost = leaseOf(pool.round('api', 10), 'api')!
    expect(lost.capacity).toBe(400)
    // The connection drops with the decrease on its way; the same process comes back.
    pool.disconnect('c', 20)
    expect(pool.connect('c', 'c', undefined, 'inst-0001', 30)).toBe('resumed')
    pool.acknowledge('c', lost.seq, undefined, 40)
    expect(pool.committed('api', 40)).toBe(1000)
    // The next report renews on this connection; its ack is what frees the difference.
    const renewal = pool.reportDemand(
      'c',
      [
        { resource: 'api', wants: 1000 },
        { resource: 'db', wants: 1 },
      ],
      50,
    ).batches
    expect(leaseOf(renewal, 'api')!.capacity).toBe(400)
    pool.acknowledge('c', renewal[0]!.seq, undefined, 60)
    expect(pool.committed('api', 60)).toBe(400)
  })

  it('counts a lapsed lease’s safe fallback until the safe hold ends', () => {
    const { pool } = setup([{ ...rate, safeCapacity: 300 }])
    pool.connect('c', 'c', undefined, 'inst-0001', 0)
    pool.reportDemand('c', [{ resource: 'api', wants: 800 }], 0)
    const lease = leaseOf(pool.round('api', 0), 'api')!
    expect(lease.capacity).toBe(800)
    expect(lease.safeCapacity).toBe(300)
    expect(lease.safeHoldMs).toBe(500)
    pool.disconnect('c', 100)
    expect(pool.committed('api', 1199)).toBe(800)
    expect(pool.committed('api', 1200)).toBe(300)
    expect(pool.committed('api', 1699)).toBe(300)
    expect(pool.committed('api', 1700)).toBe(0)
  })

  it('never sends a safe capacity above the lease itself', () => {
    const { pool } = setup([{ ...rate, safeCapacity: 900 }])
    pool.connect('c', 'c', undefined, 'inst-0001', 0)
    pool.reportDemand('c', [{ resource: 'api', wants: 200 }], 0)
    const lease = leaseOf(pool.round('api', 0), 'api')!
    expect(lease.safeCapacity).toBe(lease.capacity)
  })

  it('forgets a client that released everything, or never used anything, when it disconnects', () => {
    const { pool } = setup()
    pool.connect('a', 'a', undefined, 'inst-0001', 0)
    pool.reportDemand('a', [{ resource: 'api', wants: 10 }], 0)
    pool.round('api', 0)
    pool.release('a', ['api'], 10)
    pool.disconnect('a', 10)
    pool.connect('b', 'b', undefined, 'inst-0002', 20)
    pool.disconnect('b', 30)
    expect(pool.clientCount).toBe(0)
    expect(pool.connectedCount()).toBe(0)
  })

  it('keeps a replaced process’s leases counting until they lapse; the same process keeps them', () => {
    const { pool } = setup([rate])
    pool.connect('c', 'c', undefined, 'inst-0001', 0)
    pool.reportDemand('c', [{ resource: 'api', wants: 1000 }], 0)
    for (const b of pool.round('api', 0)) pool.acknowledge('c', b.seq, undefined, 0)
    expect(pool.connect('c', 'c', undefined, 'inst-0001', 10)).toBe('resumed')
    expect(pool.committed('api', 10)).toBe(1000)
    // Another process takes the id: the old one may still be admitting at 1000/s.
    expect(pool.connect('c', 'c', undefined, 'inst-9999', 20)).toBe('replaced')
    const renewal = pool.reportDemand('c', [{ resource: 'api', wants: 1000 }], 30).batches
    expect(leaseOf(renewal, 'api')).toBeUndefined()
    const next = leaseOf(pool.round('api', 30), 'api')!
    expect(next.capacity).toBe(0)
    pool.acknowledge('c', next.seq, undefined, 40)
    expect(pool.committed('api', 40)).toBe(1000)
    expect(pool.committed('api', 1200 + 500)).toBe(0)
    // Once it has lapsed, the new process gets the capacity.
    const later = leaseOf(pool.round('api', 1700), 'api')!
    expect(later.capacity).toBe(1000)
  })

  it('shares only what silent clients leave: a capacity cut shrinks the others until their commitments lapse', () => {
    const { pool, table } = setup([rate])
    for (const id of ['a', 'b', 'c', 'd']) {
      pool.connect(id, id, undefined, `inst-${id}-01`, 0)
      pool.reportDemand(id, [{ resource: 'api', wants: 1000 }], 0)
    }
    for (const b of pool.round('api', 0)) pool.acknowledge(b.clientKey, b.seq, undefined, 0)
    expect(pool.committed('api', 0)).toBe(1000)
    // c and d stall: they hear nothing and ack nothing. Capacity is cut to 300.
    table.set('api', { ...rate, capacity: 300, burst: 300 })
    pool.refreshSettings('api')
    const ackLive = (batches: readonly LeaseBatch[], t: number): void => {
      for (const b of batches)
        if (b.clientKey === 'a' || b.clientKey === 'b')
          pool.acknowledge(b.clientKey, b.seq, undefined, t)
    }
    ackLive(pool.round('api', 10), 10)
    // One refresh later the stalled decreases are overdue: a and b shrink to what is left (0).
    ackLive(pool.round('api', 260), 260)
    expect(pool.committed('api', 260)).toBe(500)
    for (let t = 260; t < 1700; t += 250) {
      for (const id of ['a', 'b']) pool.reportDemand(id, [{ resource: 'api', wants: 1000 }], t)
      ackLive(pool.round('api', t), t)
      expect(pool.committed('api', t)).toBeLessThanOrEqual(500)
    }
  })
})
