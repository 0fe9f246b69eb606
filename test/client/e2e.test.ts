import { afterEach, describe, expect, it } from 'vitest'
import type { ConfigInput } from '../../server/config/index.js'
import { Cluster, Load } from '../helpers/cluster.js'

const refreshMs = 100
const config = (overrides: Record<string, unknown> = {}): ConfigInput => ({
  // A restarted coordinator restores what clients hold only when their proofs verify.
  server: {
    limits: { roundDebounceMs: 0 },
    holdingsKey: { current: 'a test holdings key, 32 chars or more' },
  },
  resources: [
    {
      match: 'api',
      kind: 'rate',
      capacity: 300,
      leaseTtlMs: 1000,
      refreshMs,
      graceMs: 200,
      learningMs: 0,
      unsafeLearning: true,
      ...overrides,
    },
    {
      match: 'db',
      kind: 'concurrency',
      capacity: 20,
      leaseTtlMs: 1000,
      refreshMs,
      graceMs: 200,
      learningMs: 0,
      unsafeLearning: true,
    },
  ],
})

let cluster: Cluster | undefined
afterEach(async () => {
  await cluster?.close()
  cluster = undefined
})

async function run(loads: Load[], ms: number, stepMs = 10, each?: () => void): Promise<void> {
  for (let t = 0; t < ms; t += stepMs) {
    for (const l of loads) l.tick(stepMs)
    each?.()
    await cluster!.step(stepMs)
  }
}

describe('client and coordinator end to end (manual clock, real sockets)', () => {
  it('converges demands of 50/200/400 on 300 to 50/125/125 within three refresh periods, never over capacity·t + burst', async () => {
    cluster = new Cluster()
    await cluster.start(config())
    const resources = await Promise.all(
      ['a', 'b', 'c'].map(async (id) => (await cluster!.client(id)).resource('api')),
    )
    await cluster.settle()
    const loads = [
      new Load(resources[0]!, 50),
      new Load(resources[1]!, 200),
      new Load(resources[2]!, 400),
    ]
    const start = cluster.clock.now()
    // Three refresh periods after the first lease, shares are in place…
    await run(loads, refreshMs * 4)
    const shares = resources.map((r) => r.lease!.capacity)
    ;[50, 125, 125].forEach((share, i) => expect(shares[i]).toBeCloseTo(share, 6))
    // …and the admitted rates over the next second match them within 5%.
    const before = loads.map((l) => l.admitted)
    await run(loads, 1000)
    const rates = loads.map((l, i) => l.admitted - before[i]!)
    expect(rates[0]).toBeGreaterThanOrEqual(50 * 0.95)
    expect(rates[0]).toBeLessThanOrEqual(50 * 1.05)
    for (const rate of rates.slice(1)) {
      expect(rate).toBeGreaterThanOrEqual(125 * 0.95)
      expect(rate).toBeLessThanOrEqual(125 * 1.05)
    }
    const elapsedSec = (cluster.clock.now() - start) / 1000
    const total = loads.reduce((s, l) => s + l.admitted, 0)
    expect(total).toBeLessThanOrEqual(300 * elapsedSec + 300)
  })

  it('shrinks the others first when a fourth client joins; the newcomer reaches its share within two periods', async () => {
    cluster = new Cluster()
    await cluster.start(config())
    const resources = await Promise.all(
      ['a', 'b', 'c'].map(async (id) => (await cluster!.client(id)).resource('api')),
    )
    const loads = resources.map((r) => new Load(r, 400))
    let maxCommitted = 0
    const watch = (): void => {
      maxCommitted = Math.max(maxCommitted, cluster!.committed('api'))
    }
    await run(loads, 500, 10, watch)
    expect(resources.map((r) => r.lease?.capacity)).toEqual([100, 100, 100])

    const d = (await cluster.client('d')).resource('api')
    loads.push(new Load(d, 400))
    const joinedAt = cluster.clock.now()
    let reachedAt: number | undefined
    await run(loads, 500, 10, () => {
      watch()
      if (reachedAt === undefined && d.lease !== undefined && d.lease.capacity >= 75 - 1e-9)
        reachedAt = cluster!.clock.now()
    })
    expect(resources.map((r) => r.lease?.capacity)).toEqual([75, 75, 75])
    expect(d.lease?.capacity).toBe(75)
    expect(reachedAt! - joinedAt).toBeLessThanOrEqual(2 * refreshMs)
    expect(maxCommitted).toBeLessThanOrEqual(300)
    const status = (await cluster.server.http.inject('/v1/resources/api')).json()
    expect(status.committed).toBeLessThanOrEqual(300)
  })

  it('keeps leases until they lapse while the coordinator is down, then runs at safe capacity; after a restart, has its fallback confirmed as a holding, then shares fairly', async () => {
    cluster = new Cluster()
    await cluster.start(config({ learningMs: 300, unsafeLearning: true }))
    const resources = await Promise.all(
      ['a', 'b', 'c'].map(async (id) => (await cluster!.client(id)).resource('api')),
    )
    const loads = resources.map((r) => new Load(r, 400))
    await run(loads, 400)
    // Learning at start: nothing granted until it ends, then fair shares.
    expect(resources.map((r) => r.lease?.capacity)).toEqual([100, 100, 100])

    const port = cluster.port
    await cluster.stop()
    await run(loads, 500)
    expect(resources.map((r) => r.mode)).toEqual(['leased', 'leased', 'leased'])
    await run(loads, 600) // past ttl (1000 ms) since the last renewal
    expect(resources.map((r) => r.mode)).toEqual(['safe', 'safe', 'safe'])
    expect(resources.map((r) => r.capacity)).toEqual([100, 100, 100]) // the lease's safeCapacity: 300 / 3

    await cluster.start(config({ learningMs: 300, unsafeLearning: true }), port)
    await cluster.reconnected() // backoff ≤ 200 ms, into learning mode
    // Each reports its safe fallback as a holding; the learning coordinator confirms it with a lease.
    expect(resources.map((r) => r.mode)).toEqual(['leased', 'leased', 'leased'])
    expect(resources.map((r) => r.lease?.capacity)).toEqual([100, 100, 100])
    await run(loads, 400)
    expect(resources.map((r) => r.mode)).toEqual(['leased', 'leased', 'leased'])
    expect(resources.map((r) => r.lease?.capacity)).toEqual([100, 100, 100])
  })

  it('never lets global in-flight exceed 20 slots across four clients of a concurrency resource', async () => {
    cluster = new Cluster()
    await cluster.start(config())
    const dbs = await Promise.all(
      ['a', 'b', 'c', 'd'].map(async (id) =>
        (await cluster!.client(id)).resource('db', { kind: 'concurrency' }),
      ),
    )
    let seed = 7
    const random = (): number => {
      seed = (Math.imul(seed, 1103515245) + 12345) >>> 0
      return seed / 2 ** 32
    }
    let maxInFlight = 0
    for (let t = 0; t < 1500; t += 10) {
      for (const [i, db] of dbs.entries()) {
        // Client i wants up to 4 + 4i slots; work finishes at random.
        for (let k = 0; k < 3; k++) if (db.inFlight < 4 + 4 * i) db.tryAcquire()
        if (db.inFlight > 0 && random() < 0.4) db.releaseSlots()
      }
      maxInFlight = Math.max(
        maxInFlight,
        dbs.reduce((s, db) => s + db.inFlight, 0),
      )
      await cluster.step(10)
    }
    expect(maxInFlight).toBeLessThanOrEqual(20)
    expect(maxInFlight).toBeGreaterThanOrEqual(15) // the slots are actually used
    expect(dbs.every((db) => db.mode === 'leased')).toBe(true)
  })
})
