import { describe, expect, it } from 'vitest'
import type { LeaseMessage } from '../../shared/index.js'
import { signLease } from '../../server/coordinator/proofs.js'
import { closedAfterEach, simpleConfig, startCoordinator } from '../helpers/coordinator.js'
import { TestClient } from '../helpers/ws-client.js'

const { running, clients } = closedAfterEach()

async function start(config = simpleConfig()) {
  const { server, clock } = await startCoordinator(config)
  running.push(server)
  const join = async (
    id: string,
    wants: number,
    extra: Record<string, unknown> = {},
  ): Promise<TestClient> => {
    const c = await TestClient.connect(server.wsUrl)
    clients.push(c)
    await c.hello(id, extra)
    c.send({ type: 'demand', resources: [{ resource: 'api', wants }] })
    await c.flush()
    return c
  }
  return { server, clock, join }
}

function capacityOf(lease: LeaseMessage, resource = 'api'): number {
  return lease.leases.find((l) => l.resource === resource)!.capacity
}

describe('coordinator over WebSocket', () => {
  it('leases weighted max-min shares: demand 50/200/400 of 300 → 50/125/125', async () => {
    const { clock, join } = await start()
    const a = await join('a', 50)
    const b = await join('b', 200)
    const c = await join('c', 400)
    clock.advance(0) // the prompt round after the joins
    const leases = await Promise.all([a, b, c].map((x) => x.nextLease('api')))
    expect(leases.map((l) => capacityOf(l))).toEqual([50, 125, 125])
    const lease = leases[0]!.leases[0]!
    expect(lease).toMatchObject({ kind: 'rate', ttlMs: 1000, refreshMs: 100 })
    expect(lease.burst).toBeCloseTo(50) // one second of capacity, shared like capacity
  })

  it('shrinks the incumbent first and grants the newcomer only once the decrease is acknowledged', async () => {
    const { server, clock, join } = await start()
    const a = await join('a', 1000)
    clock.advance(0)
    const first = await a.nextLease('api')
    expect(capacityOf(first)).toBe(300)
    a.send({ type: 'ack', seq: first.seq })

    const b = await join('b', 1000)
    clock.advance(0)
    const decrease = await a.nextLease('api')
    expect(capacityOf(decrease)).toBe(150)
    // Before a acknowledges, b may only have what is free: nothing.
    const early = await b.nextLease('api')
    expect(capacityOf(early)).toBe(0)
    const status = () => server.coordinator.view.committed('api')
    expect(status()).toBeLessThanOrEqual(300)

    a.send({ type: 'ack', seq: decrease.seq })
    const grown = await b.nextLease('api')
    expect(capacityOf(grown)).toBe(150)
    expect(status()).toBeLessThanOrEqual(300)
  })

  it('sends an increase whole once the acks that make room have come, and what they leave a debounce later', async () => {
    const { clock, join } = await start()
    const [a, b, c] = [await join('a', 100), await join('b', 100), await join('c', 100)]
    clock.advance(0)
    for (const x of [a, b, c]) x.send({ type: 'ack', seq: (await x.nextLease('api')).seq })
    for (const x of [a, b, c]) await x.flush()
    const round = async (wants: [number, number, number]): Promise<LeaseMessage[]> => {
      ;[a, b, c].forEach((x, i) =>
        x.send({ type: 'demand', resources: [{ resource: 'api', wants: wants[i]! }] }),
      )
      for (const x of [a, b, c]) await x.flush()
      clock.advance(100) // the periodic round: a 200, b 50, c 50 (or back)
      return [await b.nextLease('api'), await c.nextLease('api')]
    }
    // Both decreases acknowledged: a's increase goes out whole, in one lease.
    let [toB, toC] = await round([300, 50, 50])
    expect([capacityOf(toB!), capacityOf(toC!)]).toEqual([50, 50])
    b.send({ type: 'ack', seq: toB!.seq })
    await b.flush()
    c.send({ type: 'ack', seq: toC!.seq })
    const whole = await a.nextLease('api')
    expect(capacityOf(whole)).toBe(200)

    // Back to 100 each: a shrinks; once it acknowledges, b and c grow, each in one lease.
    a.send({ type: 'ack', seq: whole.seq })
    ;[a, b, c].forEach((x) =>
      x.send({ type: 'demand', resources: [{ resource: 'api', wants: 100 }] }),
    )
    for (const x of [a, b, c]) await x.flush()
    clock.advance(100)
    const shrink = await a.nextLease('api')
    expect(capacityOf(shrink)).toBe(100)
    a.send({ type: 'ack', seq: shrink.seq })
    for (const x of [b, c]) {
      const grown = await x.nextLease('api')
      expect(capacityOf(grown)).toBe(100)
      x.send({ type: 'ack', seq: grown.seq })
      await x.flush()
    }
    // Again, but only b acknowledges: the 50 it freed goes to a a debounce after its ack
    // (roundDebounceMs, 0 here: the next turn of the clock), not at once.
    ;[toB, toC] = await round([300, 50, 50])
    b.send({ type: 'ack', seq: toB!.seq })
    await b.flush()
    clock.advance(0)
    expect(capacityOf(await a.nextLease('api'))).toBe(150)
  })

  it('frees an unacknowledged decrease only when the old lease lapses (ttl + grace) and its safe fallback after it (safeHoldMs)', async () => {
    const { server, clock, join } = await start()
    const a = await join('a', 1000)
    clock.advance(0)
    await a.nextLease('api') // 300, never acknowledged
    const b = await join('b', 1000)
    clock.advance(0)
    expect(capacityOf(await a.nextLease('api'))).toBe(150)
    expect(capacityOf(await b.nextLease('api'))).toBe(0)
    // a stays silent: its 300 lease counts until 1000 + 200 ms after it was sent, then its
    // safe fallback (300, the whole capacity when it was alone) for safeHoldMs (500 ms).
    clock.advance(1100)
    await b.flush()
    expect(server.coordinator.view.clients('api').find((c) => c.id === 'b')!.lease).toBe(0)
    clock.advance(200)
    await b.flush()
    expect(server.coordinator.view.committed('api')).toBe(300)
    expect(server.coordinator.view.clients('api').find((c) => c.id === 'b')!.lease).toBe(0)
    clock.advance(400)
    const grown = await b.next<LeaseMessage>(
      (m) => m.type === 'lease' && m.leases.some((l) => l.capacity > 0),
    )
    expect(capacityOf(grown)).toBeCloseTo(150)
  })

  it('renews a lease in reply to a report once a third to a half of its life has passed, never before a third', async () => {
    const { clock, join } = await start()
    const a = await join('a', 100)
    clock.advance(0)
    const first = await a.nextLease('api')
    clock.advance(330) // a third of the 1000 ms ttl is 333 ms
    a.send({ type: 'demand', resources: [{ resource: 'api', wants: 100 }] })
    await a.flush()
    expect(a.received.filter((m) => m.type === 'lease')).toEqual([])
    clock.advance(170) // half of it: due whatever the lease's sequence number
    a.send({ type: 'demand', resources: [{ resource: 'api', wants: 100 }] })
    const renewal = await a.nextLease('api')
    expect(renewal.seq).toBeGreaterThan(first.seq)
    expect(capacityOf(renewal)).toBe(capacityOf(first))
  })

  it('keeps a disconnected client’s lease committed until it lapses, and its safe fallback for the safe hold', async () => {
    const { server, clock, join } = await start()
    const a = await join('a', 300)
    clock.advance(0)
    await a.nextLease('api')
    a.ws.terminate()
    await a.closed
    const b = await join('b', 300)
    clock.advance(0)
    expect(capacityOf(await b.nextLease('api'))).toBe(0)
    expect(server.coordinator.view.committed('api')).toBe(300)
    clock.advance(1200)
    await b.flush()
    expect(server.coordinator.view.committed('api')).toBe(300)
    clock.advance(500)
    const grown = await b.next<LeaseMessage>(
      (m) => m.type === 'lease' && m.leases.some((l) => l.capacity > 0),
    )
    expect(capacityOf(grown)).toBe(300)
  })

  it('runs a round every refreshMs without any event', async () => {
    const { server, clock, join } = await start()
    await join('a', 10)
    clock.advance(0)
    const before = server.coordinator.view.resource('api')!.rounds
    clock.advance(500)
    expect(server.coordinator.view.resource('api')!.rounds).toBe(before + 5)
  })

  it('answers an unknown resource with an error reply and keeps the connection', async () => {
    const { server, clock } = await start()
    const c = await TestClient.connect(server.wsUrl)
    clients.push(c)
    await c.hello('x')
    c.send({
      type: 'demand',
      resources: [
        { resource: 'nope', wants: 1 },
        { resource: 'api', wants: 5 },
      ],
    })
    const error = await c.nextOfType('error')
    expect(error).toMatchObject({ code: 'SLUICE_ERR_RESOURCE_UNKNOWN', resource: 'nope' })
    clock.advance(0)
    expect(capacityOf(await c.nextLease('api'))).toBe(5)
  })

  it('matches resource ids to templates exact first, then globs in order, `/` included', async () => {
    const { server, clock } = await start({
      server: { limits: { roundDebounceMs: 0 } },
      resources: [
        { match: 'tenant/*', kind: 'rate', capacity: 10, learningMs: 0, unsafeLearning: true },
        {
          match: 'tenant/special',
          kind: 'concurrency',
          capacity: 7,
          learningMs: 0,
          unsafeLearning: true,
        },
      ],
    } as never)
    const c = await TestClient.connect(server.wsUrl)
    clients.push(c)
    await c.hello('x')
    c.send({
      type: 'demand',
      resources: [
        { resource: 'tenant/special', wants: 100 },
        { resource: 'tenant/a/b', wants: 100 },
      ],
    })
    await c.flush()
    clock.advance(0)
    const special = await c.nextLease('tenant/special')
    const nested = await c.nextLease('tenant/a/b')
    expect(special.leases.find((l) => l.resource === 'tenant/special')).toMatchObject({
      kind: 'concurrency',
      capacity: 7,
    })
    expect(nested.leases.find((l) => l.resource === 'tenant/a/b')).toMatchObject({
      kind: 'rate',
      capacity: 10,
    })
  })
})

describe('learning mode', () => {
  it('restores holdings whose proof verifies (never beyond capacity), not forged or expired ones, and makes newcomers wait until learning ends', async () => {
    const keys = { current: 'the replicas share this holdings key!', previous: [] }
    const { server, clock } = await startCoordinator(
      simpleConfig({ learningMs: 1000, unsafeLearning: true }, { holdingsKey: keys }),
    )
    running.push(server)
    // What an earlier coordinator with the same key signed for each client.
    const proof = (clientId: string, capacity: number, sentWallMs = clock.wallNow()) =>
      signLease(
        keys,
        { tenant: undefined, clientId, resource: 'api' },
        {
          resource: 'api',
          kind: 'rate',
          capacity,
          burst: capacity,
          ttlMs: 1000,
          refreshMs: 100,
          safeCapacity: capacity,
          safeHoldMs: 500,
        },
        sentWallMs,
        200,
      )
    const old1 = await TestClient.connect(server.wsUrl)
    const old2 = await TestClient.connect(server.wsUrl)
    const forger = await TestClient.connect(server.wsUrl)
    const stale = await TestClient.connect(server.wsUrl)
    const fresh = await TestClient.connect(server.wsUrl)
    clients.push(old1, old2, forger, stale, fresh)
    // A forged claim (another client's proof, a huge amount) and an expired one count as 0.
    await forger.hello('forger', {
      holdings: [{ resource: 'api', capacity: 1e15, proof: proof('old1', 1e15) }],
    })
    expect(capacityOf(await forger.nextLease('api'))).toBe(0)
    await stale.hello('stale', {
      holdings: [
        { resource: 'api', capacity: 100, proof: proof('stale', 100, clock.wallNow() - 5000) },
      ],
    })
    expect(capacityOf(await stale.nextLease('api'))).toBe(0)
    await old1.hello('old1', {
      holdings: [{ resource: 'api', capacity: 200, proof: proof('old1', 200) }],
    })
    expect(capacityOf(await old1.nextLease('api'))).toBe(200)
    await old2.hello('old2', {
      holdings: [{ resource: 'api', capacity: 200, proof: proof('old2', 200) }],
    })
    expect(capacityOf(await old2.nextLease('api'))).toBe(100) // only what is left of 300
    await fresh.hello('fresh')
    for (const c of [old1, old2, fresh])
      c.send({ type: 'demand', resources: [{ resource: 'api', wants: 1000 }] })
    await fresh.flush()
    clock.advance(0)
    await fresh.flush()
    expect(fresh.received.filter((m) => m.type === 'lease')).toEqual([])
    expect(server.coordinator.view.committed('api')).toBe(300)
    for (const c of [forger, stale]) c.ws.terminate()

    // Learning ends: normal rounds share fairly, the newcomer first gets what is free as acks come in.
    clock.advance(1000)
    const lease = await fresh.nextLease('api')
    expect(capacityOf(lease)).toBe(0)
    // old1 is cut from 200 to 100; old2 keeps its 100. Only old1's ack frees room for the newcomer.
    const cut = await old1.next<LeaseMessage>(
      (m) => m.type === 'lease' && m.leases.some((l) => l.capacity === 100),
    )
    await fresh.flush()
    expect(fresh.received.filter((m) => m.type === 'lease')).toEqual([])
    old1.send({ type: 'ack', seq: cut.seq })
    const grown = await fresh.next<LeaseMessage>(
      (m) => m.type === 'lease' && m.leases.some((l) => l.capacity > 0),
    )
    expect(capacityOf(grown)).toBe(100)
  })

  it('trusts no claimed holding without a holdings key', async () => {
    const { server } = await startCoordinator(
      simpleConfig({ learningMs: 1000, unsafeLearning: true }),
    )
    running.push(server)
    const claimer = await TestClient.connect(server.wsUrl)
    clients.push(claimer)
    await claimer.hello('claimer', { holdings: [{ resource: 'api', capacity: 200 }] })
    expect(capacityOf(await claimer.nextLease('api'))).toBe(0)
    expect(server.coordinator.view.committed('api')).toBe(0)
  })
})
