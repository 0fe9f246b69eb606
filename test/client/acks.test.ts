import { afterEach, describe, expect, it } from 'vitest'
import type { ConfigInput } from '../../server/config/index.js'
import { Cluster } from '../helpers/cluster.js'

// The client library's side of the ack rules, against a real coordinator: each lease is
// acknowledged on its own, a held-back concurrency ack holds back nothing else and is implied by
// nothing else, and a process whose id another process takes stops enforcing at once.

const config = (api: number, db: number): ConfigInput => ({
  server: { limits: { roundDebounceMs: 0 } },
  resources: [
    {
      match: 'api',
      kind: 'rate',
      capacity: api,
      leaseTtlMs: 1000,
      refreshMs: 100,
      graceMs: 200,
      safeHoldMs: 300,
      learningMs: 0,
      unsafeLearning: true,
      surplus: 'hold',
      demand: { window: 1 },
    },
    {
      match: 'db',
      kind: 'concurrency',
      capacity: db,
      leaseTtlMs: 1000,
      refreshMs: 100,
      graceMs: 200,
      safeHoldMs: 300,
      learningMs: 0,
      unsafeLearning: true,
      surplus: 'hold',
      demand: { window: 1 },
    },
  ],
})

let cluster: Cluster | undefined
afterEach(async () => {
  await cluster?.close()
  cluster = undefined
})

describe('client acks', () => {
  it('holds back only the concurrency decrease that has not drained; another resource’s ack never covers it', async () => {
    cluster = new Cluster()
    await cluster.start(config(1000, 10))
    const c = await cluster.client('c')
    const api = c.resource('api', { wants: 1000 })
    const db = c.resource('db', { wants: 10 })
    for (let t = 0; t < 300; t += 50) await cluster.step(50)
    expect(db.capacity).toBe(10)
    expect(db.tryAcquire(10)).toBe(true)

    // db is cut to 5 while 10 slots are in flight; then api changes, and its lease is acked.
    await cluster.server.reload(config(1000, 5))
    for (let t = 0; t < 100; t += 50) await cluster.step(50)
    expect(db.capacity).toBe(5)
    await cluster.server.reload(config(800, 5))
    for (let t = 0; t < 500; t += 50) await cluster.step(50)
    expect(api.capacity).toBe(800)
    // Well past ttl + grace: still counted at 10, since 10 are in flight and the client is there.
    expect(cluster.committed('db')).toBe(10)

    db.releaseSlots(5)
    for (let t = 0; t < 100; t += 50) await cluster.step(50)
    expect(cluster.committed('db')).toBe(5)
  })

  it('stops enforcing at once when another process takes its client id (4409), and comes back under a fresh id', async () => {
    cluster = new Cluster()
    await cluster.start(config(300, 10))
    const first = await cluster.client('dup')
    const r1 = first.resource('api', { wants: 300 })
    for (let t = 0; t < 300; t += 50) await cluster.step(50)
    expect(r1.capacity).toBe(300)

    const replaced = new Promise((resolve) => first.once('disconnect', resolve))
    const second = await cluster.client('dup')
    expect(await replaced).toBe(4409)
    expect(r1.capacity).toBe(0)
    expect(r1.mode).toBe('lapsed')
    const r2 = second.resource('api', { wants: 300 })
    let maxSum = 0
    for (let t = 0; t < 3000; t += 50) {
      await cluster.step(50)
      maxSum = Math.max(maxSum, r1.capacity + r2.capacity)
    }
    expect(first.clientId).not.toBe('dup')
    expect(first.clientId.startsWith('dup-')).toBe(true)
    expect(first.connected && second.connected).toBe(true)
    expect(maxSum).toBeLessThanOrEqual(300 + 1e-9)
    expect(r1.capacity + r2.capacity).toBeCloseTo(300)
  })
})
