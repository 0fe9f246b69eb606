import { describe, expect, it } from 'vitest'
import { createClient, type SluiceClient } from '../../client/index.js'
import type { ConfigInput } from '../../server/config/index.js'
import { closedAfterEach, startCoordinator } from '../helpers/coordinator.js'
import { TestClient } from '../helpers/ws-client.js'

// Sessions against a real coordinator over real sockets: who may take a client id, what happens
// to the leases of the process that had it, and that closed clients do not leak.

const { running, clients } = closedAfterEach()

const config = (maxClients?: number): ConfigInput => ({
  server: { limits: { roundDebounceMs: 0 } },
  tenants: {
    a: { token: 'tenant-a-token', ...(maxClients === undefined ? {} : { maxClients }) },
    b: { token: 'tenant-b-token' },
  },
  resources: [
    {
      match: 'api',
      kind: 'rate',
      capacity: 1000,
      leaseTtlMs: 1000,
      refreshMs: 100,
      graceMs: 200,
      safeHoldMs: 300,
      surplus: 'hold',
      demand: { window: 1 },
    },
  ],
})

async function join(url: string, id: string, token: string, instance?: string) {
  const c = await TestClient.connect(url)
  clients.push(c)
  await c.hello(id, { token, ...(instance === undefined ? {} : { instance }) })
  return c
}

describe('sessions', () => {
  it('scopes client ids by tenant: another tenant using the same id neither closes the session nor touches its leases', async () => {
    const { server, clock } = await startCoordinator(config())
    running.push(server)
    // Past learning (1500 ms by default here).
    clock.advance(1500)
    const mine = await join(server.wsUrl, 'shared-id', 'tenant-a-token', 'instance-a1')
    mine.send({ type: 'demand', resources: [{ resource: 'api', wants: 1000 }] })
    await mine.flush()
    clock.advance(0)
    const lease = await mine.nextLease('api')
    expect(lease.leases[0]!.capacity).toBe(1000)
    mine.send({ type: 'ack', seq: lease.seq })

    const theirs = await join(server.wsUrl, 'shared-id', 'tenant-b-token', 'instance-b1')
    theirs.send({ type: 'demand', resources: [{ resource: 'api', wants: 1000 }] })
    await theirs.flush()
    await mine.flush()
    expect(mine.closeCode).toBeUndefined()
    const ids = server.coordinator.view.clients('api').map((c) => `${c.tenant}/${c.id}`)
    expect(ids.sort()).toEqual(['a/shared-id', 'b/shared-id'])
    expect(server.coordinator.view.committed('api')).toBeLessThanOrEqual(1000)
  })

  it('keeps the leases of a process whose id another process took until they lapse, and tells it with 4409', async () => {
    const { server, clock } = await startCoordinator(config())
    running.push(server)
    clock.advance(1500)
    const first = await join(server.wsUrl, 'dup', 'tenant-a-token', 'instance-one')
    first.send({ type: 'demand', resources: [{ resource: 'api', wants: 1000 }] })
    await first.flush()
    clock.advance(0)
    const lease = await first.nextLease('api')
    first.send({ type: 'ack', seq: lease.seq })
    await first.flush()

    const second = await join(server.wsUrl, 'dup', 'tenant-a-token', 'instance-two')
    expect(await first.closed).toBe(4409)
    second.send({ type: 'demand', resources: [{ resource: 'api', wants: 1000 }] })
    await second.flush()
    clock.advance(0)
    // The first process may still be admitting at 1000/s: nothing is free for the second.
    const waiting = await second.nextLease('api')
    expect(waiting.leases[0]!.capacity).toBe(0)
    second.send({ type: 'ack', seq: waiting.seq })
    await second.flush()
    expect(server.coordinator.view.committed('api')).toBe(1000)
    // Lease (1000) + grace (200) + safe hold (300) after it was sent: then it is the second's,
    // and not before.
    const grown = (): boolean =>
      second.received.some((m) => m.type === 'lease' && m.leases.some((l) => l.capacity === 1000))
    let grownAtMs: number | undefined
    for (let t = 100; t <= 1600; t += 100) {
      clock.advance(100)
      second.send({ type: 'demand', resources: [{ resource: 'api', wants: 1000 }] })
      await second.flush()
      expect(server.coordinator.view.committed('api')).toBeLessThanOrEqual(1000)
      if (grownAtMs === undefined && grown()) grownAtMs = t
    }
    expect(grownAtMs, 'the second process got the whole capacity').toBeDefined()
    expect(grownAtMs!).toBeGreaterThanOrEqual(1500)
  })

  it('forgets clients that close, so maxClients counts live ones: graceful restarts never hit 4503', async () => {
    const { server, clock } = await startCoordinator(config(2))
    running.push(server)
    clock.advance(1500)
    const opened: SluiceClient[] = []
    for (let i = 0; i < 6; i++) {
      const c = createClient({ url: server.wsUrl, token: 'tenant-a-token', clock })
      opened.push(c)
      c.resource('api', { wants: 10 })
      await new Promise<void>((resolve) => c.once('connect', () => resolve()))
      await c.roundTrip()
      await c.close()
    }
    // A hello that names no resource holds nothing either.
    for (let i = 0; i < 4; i++) {
      const bare = await join(server.wsUrl, `bare-${i}`, 'tenant-a-token')
      await bare.close()
    }
    await fetch(`${server.url}/healthz`)
    const errors = await server.coordinator.metrics.errors.get()
    expect(errors.values.find((v) => v.labels.code === 'SLUICE_ERR_LIMIT_CLIENTS')).toBeUndefined()
    expect(server.coordinator.connectionCount).toBe(0)
    expect(server.coordinator.view.clients('api')).toEqual([])
  })
})
