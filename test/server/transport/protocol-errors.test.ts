import fc from 'fast-check'
import { describe, expect, it } from 'vitest'
import type { LeaseMessage } from '../../../shared/index.js'
import { closedAfterEach, simpleConfig, startCoordinator } from '../../helpers/coordinator.js'
import { TestClient } from '../../helpers/ws-client.js'

const { running, clients } = closedAfterEach()

async function start(config = simpleConfig()) {
  const started = await startCoordinator(config)
  running.push(started.server)
  const open = async (headers: Record<string, string> = {}): Promise<TestClient> => {
    const c = await TestClient.connect(started.server.wsUrl, headers)
    clients.push(c)
    return c
  }
  return { ...started, open }
}

describe('protocol errors close the connection with the catalogue’s code', () => {
  it('closes with 4400 on a frame that is not JSON, after an error message naming the code', async () => {
    const { open } = await start()
    const c = await open()
    c.sendRaw('{not json')
    expect(await c.closed).toBe(4400)
    expect(c.closeReason).toBe('SLUICE_ERR_PROTO_MALFORMED')
    expect(c.received[0]).toMatchObject({ type: 'error', code: 'SLUICE_ERR_PROTO_MALFORMED' })
  })

  it('closes with 4400 naming the field when a message breaks the schema', async () => {
    const { open } = await start()
    const c = await open()
    await c.hello('a')
    c.send({ type: 'demand', resources: [{ resource: 'api', wants: -1 }] })
    expect(await c.closed).toBe(4400)
    const error = c.received.find((m) => m.type === 'error')
    expect(error?.type === 'error' && error.message).toContain('resources[0].wants')
  })

  it('closes with 4402 on a message before hello, and on a second hello', async () => {
    const { open } = await start()
    const early = await open()
    early.send({ type: 'ack', seq: 1 })
    expect(await early.closed).toBe(4402)
    const twice = await open()
    await twice.hello('b')
    twice.send({ type: 'hello', v: 1, clientId: 'b' })
    expect(await twice.closed).toBe(4402)
  })

  it('closes with 4402 on remote decisions before hello, past the asks budget too', async () => {
    const config = simpleConfig({}, { limits: { roundDebounceMs: 0, maxAsksPerSec: 2 } })
    config.resources = [
      ...config.resources,
      {
        match: 'k/*',
        keyed: true,
        kind: 'rate',
        capacity: 10,
        learningMs: 0,
        unsafeLearning: true,
      },
    ]
    const { open } = await start(config)
    const c = await open()
    // 5 asks of a budget of 2 a second (4 in a burst): the fifth was answered refused.
    c.send({ type: 'decide', asks: [0, 1, 2, 3, 4].map((n) => [n, 'k/a', 1]) })
    expect(await c.closed).toBe(4402)
    expect(c.received.filter((m) => m.type === 'decided')).toEqual([])
  })

  it('closes with 4406 on an unsupported protocol version', async () => {
    const { open } = await start()
    const c = await open()
    c.send({ type: 'hello', v: 99, clientId: 'a' })
    expect(await c.closed).toBe(4406)
  })

  it('closes with 4408 when no hello comes within helloTimeoutMs', async () => {
    const { open, clock } = await start(
      simpleConfig({}, { limits: { roundDebounceMs: 0, helloTimeoutMs: 500 } }),
    )
    const c = await open()
    clock.advance(499)
    await c.flush()
    expect(c.closeCode).toBeUndefined()
    clock.advance(1)
    expect(await c.closed).toBe(4408)
  })

  it('does not time out a hello sent before the timer fired and read after it (a loop behind)', async () => {
    const { open, clock } = await start(
      simpleConfig({}, { limits: { roundDebounceMs: 0, helloTimeoutMs: 500 } }),
    )
    const c = await open()
    c.send({ type: 'hello', v: 1, clientId: 'read-late' })
    // The timer fires now, before the coordinator's loop has read the hello from its socket.
    clock.advance(500)
    await c.flush()
    expect(c.closeCode).toBeUndefined()
    expect(c.received.map((m) => m.type)).toContain('welcome')
  })

  it('closes with 4413 on a frame above maxFrameBytes', async () => {
    const { open } = await start(
      simpleConfig({}, { limits: { roundDebounceMs: 0, maxFrameBytes: 2048 } }),
    )
    const c = await open()
    await c.hello('a')
    c.sendRaw(JSON.stringify({ type: 'release', resources: ['x'.repeat(3000)] }))
    expect(await c.closed).toBe(4413)
  })

  it('closes with 4429 when a connection sends faster than maxMessagesPerSec (bursts of twice allowed)', async () => {
    const { open } = await start(
      simpleConfig({}, { limits: { roundDebounceMs: 0, maxMessagesPerSec: 5 } }),
    )
    const c = await open()
    await c.hello('a') // 1 message; the manual clock does not move, so nothing refills
    for (let i = 0; i < 9; i++) c.send({ type: 'ack', seq: 1 })
    await c.flush()
    expect(c.closeCode).toBeUndefined()
    c.send({ type: 'ack', seq: 1 })
    expect(await c.closed).toBe(4429)
  })

  it('closes with 4401 when tenants are configured and the token is wrong or missing', async () => {
    const config = { ...simpleConfig(), tenants: { shop: { token: 'shop-secret-token' } } }
    const { open } = await start(config)
    const missing = await open()
    missing.send({ type: 'hello', v: 1, clientId: 'a' })
    expect(await missing.closed).toBe(4401)
    const wrong = await open()
    wrong.send({ type: 'hello', v: 1, clientId: 'b', token: 'not-the-token' })
    expect(await wrong.closed).toBe(4401)
    const viaHeader = await open({ authorization: 'Bearer shop-secret-token' })
    viaHeader.send({ type: 'hello', v: 1, clientId: 'c' })
    expect(await viaHeader.nextOfType('welcome')).toMatchObject({ tenant: 'shop' })
  })

  it('closes with 4503 past maxClients, and the older session with 4409 when its id connects again', async () => {
    const { open } = await start(
      simpleConfig({}, { limits: { roundDebounceMs: 0, maxClients: 1 } }),
    )
    const first = await open()
    await first.hello('a')
    const second = await open()
    second.send({ type: 'hello', v: 1, clientId: 'b' })
    expect(await second.closed).toBe(4503)
    const again = await open()
    await again.hello('a')
    expect(await first.closed).toBe(4409)
  })

  it('answers past maxResourcesPerClient with an error reply and keeps serving the rest', async () => {
    const config = {
      server: { limits: { roundDebounceMs: 0, maxResourcesPerClient: 2 } },
      resources: [{ match: '*', kind: 'rate', capacity: 10, learningMs: 0, unsafeLearning: true }],
    } as const
    const { open, clock } = await start(config as never)
    const c = await open()
    await c.hello('a')
    c.send({
      type: 'demand',
      resources: ['r1', 'r2', 'r3'].map((resource) => ({ resource, wants: 1 })),
    })
    expect(await c.nextOfType('error')).toMatchObject({
      code: 'SLUICE_ERR_LIMIT_RESOURCES',
      resource: 'r3',
    })
    clock.advance(0)
    await c.nextLease('r1')
    expect(c.closeCode).toBeUndefined()
  })

  it('closes with 4410 a peer that stops answering pings', async () => {
    const { open, clock } = await start(
      simpleConfig({}, { limits: { roundDebounceMs: 0, heartbeatMs: 1000 } }),
    )
    const c = await open()
    await c.hello('a')
    // ws answers pings automatically; pause the socket so no pong goes back.
    const socket = (c.ws as unknown as { _socket: { pause(): void; resume(): void } })._socket
    socket.pause()
    clock.advance(1000) // ping
    clock.advance(1000) // no pong since: terminated
    socket.resume()
    const code = await c.closed
    expect([4410, 1006]).toContain(code)
  })
})

describe('fuzzing a live coordinator', () => {
  const frame = fc.oneof(
    fc.string({ maxLength: 200 }),
    fc.json({ maxDepth: 3 }),
    fc.constantFrom(
      '{"type":"hello","v":1,"clientId":""}',
      '{"type":"demand","resources":"x"}',
      'null',
      '[]',
      '{"type":"ack","seq":-1}',
    ),
    fc
      .record(
        {
          type: fc.constantFrom('hello', 'demand', 'ack', 'release', 'lease', 'welcome'),
          v: fc.oneof(fc.constant(1), fc.integer()),
          clientId: fc.string({ maxLength: 20 }),
          seq: fc.oneof(fc.integer(), fc.double()),
          resources: fc.array(
            fc.record({
              resource: fc.oneof(fc.constant('api'), fc.string({ maxLength: 10 })),
              wants: fc.oneof(fc.double(), fc.integer(), fc.constant(null)),
              priority: fc.oneof(fc.double(), fc.integer()),
            }),
            { maxLength: 3 },
          ),
        },
        { requiredKeys: ['type'] },
      )
      .map((m) => JSON.stringify(m)),
  )

  it('keeps serving a well-behaved client while arbitrary and mutated frames arrive', async () => {
    let fuzzRun = 0
    const { open, clock, server } = await start()
    const good = await open()
    await good.hello('good')
    await fc.assert(
      fc.asyncProperty(
        fc.array(frame, { minLength: 1, maxLength: 8 }),
        fc.boolean(),
        async (frames, helloFirst) => {
          const bad = await open()
          if (helloFirst) bad.send({ type: 'hello', v: 1, clientId: `fuzz-${fuzzRun++}` })
          for (const f of frames) bad.sendRaw(f)
          await bad.flush().catch(() => undefined)
          bad.ws.terminate()
          await bad.closed
          // Past half the lease's life, so the report earns a renewal (due from a third to a half).
          clock.advance(500)
          good.send({ type: 'demand', resources: [{ resource: 'api', wants: 10 }] })
          await good.flush()
          clock.advance(0)
          const lease = await good.next<LeaseMessage>((m) => m.type === 'lease')
          expect(lease.leases[0]!.resource).toBe('api')
          expect(server.coordinator.view.committed('api')).toBeLessThanOrEqual(300)
        },
      ),
      { numRuns: Math.min(200, fc.readConfigureGlobal().numRuns ?? 100) },
    )
    expect(good.closeCode).toBeUndefined()
  })
})

describe('fuzzing a live coordinator as a hostile tenant', () => {
  const tenants = {
    a: { token: 'tenant-a-token' },
    b: { token: 'tenant-b-token' },
  }
  // What a hostile tenant's client may send: the victim's id, any priority, claims of any size
  // with made-up proofs, acks and releases of anything, in any order.
  const hostile = fc.oneof(
    fc.record({
      type: fc.constant('hello'),
      v: fc.constant(1),
      clientId: fc.constantFrom('victim', 'b-client'),
      instance: fc.constantFrom('victim-instance-1', 'hostile-instance'),
      holdings: fc.array(
        fc.record({
          resource: fc.constant('api'),
          capacity: fc.oneof(fc.constant(1e15), fc.integer({ min: 0, max: 1000 })),
          proof: fc.record({
            capacity: fc.constant(1e15),
            fallback: fc.constant(1e15),
            untilMs: fc.constant(Number.MAX_SAFE_INTEGER),
            fallbackUntilMs: fc.constant(Number.MAX_SAFE_INTEGER),
            mac: fc.string({ minLength: 1, maxLength: 40 }),
          }),
        }),
        { maxLength: 2 },
      ),
    }),
    fc.record({
      type: fc.constant('demand'),
      resources: fc.array(
        fc.record({
          resource: fc.constant('api'),
          wants: fc.integer({ min: 0, max: 1e6 }),
          priority: fc.integer({ min: -1_000_000, max: 1_000_000 }),
          weight: fc.double({ min: 1e-6, max: 1e6, noNaN: true }),
        }),
        { minLength: 1, maxLength: 2 },
      ),
    }),
    fc.record({ type: fc.constant('ack'), seq: fc.integer({ min: 1, max: 10_000 }) }),
    fc.record({ type: fc.constant('release'), resources: fc.constant(['api']) }),
  )

  it('never lets another tenant close the victim’s session, touch its leases, or push Σ committed past capacity', async () => {
    const { open, clock, server } = await start({
      ...simpleConfig(
        { learningMs: 1000, unsafeLearning: true },
        {
          limits: { roundDebounceMs: 0, maxMessagesPerSec: 1000 },
          holdingsKey: { current: 'a key the hostile tenant does not know!' },
        },
      ),
      tenants,
    })
    const victim = await open()
    await victim.hello('victim', { token: 'tenant-a-token', instance: 'victim-instance-1' })
    clock.advance(1000)
    await fc.assert(
      fc.asyncProperty(fc.array(hostile, { minLength: 1, maxLength: 8 }), async (messages) => {
        const attacker = await open({ authorization: 'Bearer tenant-b-token' })
        for (const m of messages) attacker.send(m)
        await attacker.flush().catch(() => undefined)
        attacker.ws.terminate()
        await attacker.closed
        clock.advance(500)
        victim.send({ type: 'demand', resources: [{ resource: 'api', wants: 150 }] })
        await victim.flush()
        clock.advance(0)
        const lease = await victim.next<LeaseMessage>((m) => m.type === 'lease')
        victim.send({ type: 'ack', seq: lease.seq })
        expect(victim.closeCode).toBeUndefined()
        expect(server.coordinator.view.committed('api')).toBeLessThanOrEqual(300)
      }),
      { numRuns: Math.min(100, fc.readConfigureGlobal().numRuns ?? 100) },
    )
    // Every run left the victim its own session and a lease of its own.
    const mine = server.coordinator.view.clients('api').filter((c) => c.tenant === 'a')
    expect(mine.map((c) => c.id)).toEqual(['victim'])
    expect(victim.closeCode).toBeUndefined()
  })
})
