import { describe, expect, it } from 'vitest'
import type { ConfigInput } from '../../server/config/index.js'
import { closedAfterEach, startCoordinator } from '../helpers/coordinator.js'
import { TestClient } from '../helpers/ws-client.js'

const { running, clients } = closedAfterEach()

const config: ConfigInput = {
  server: { limits: { roundDebounceMs: 0 } },
  tenants: {
    gold: { token: 'gold-token-1', weight: 3, caps: { 'search*': 500 } },
    bronze: { token: 'bronze-token', weight: 1, resources: ['search'], maxClients: 1 },
  },
  resources: [
    {
      match: '*',
      kind: 'rate',
      capacity: 400,
      surplus: 'hold',
      learningMs: 0,
      unsafeLearning: true,
    },
  ],
}

async function join(url: string, id: string, token: string): Promise<TestClient> {
  const c = await TestClient.connect(url)
  clients.push(c)
  await c.hello(id, { token })
  return c
}

describe('tenants in the coordinator', () => {
  it('splits capacity between tenants by weight, then between a tenant’s clients', async () => {
    const { server, clock } = await startCoordinator(config)
    running.push(server)
    const g1 = await join(server.wsUrl, 'g1', 'gold-token-1')
    const g2 = await join(server.wsUrl, 'g2', 'gold-token-1')
    const b1 = await join(server.wsUrl, 'b1', 'bronze-token')
    for (const c of [g1, g2, b1]) {
      c.send({ type: 'demand', resources: [{ resource: 'search', wants: 1000 }] })
      await c.flush()
    }
    clock.advance(0)
    const grants = await Promise.all(
      [g1, g2, b1].map(async (c) => (await c.nextLease('search')).leases[0]!.capacity),
    )
    expect(grants).toEqual([150, 150, 100])
  })

  it('refuses a resource outside the tenant’s list with an error reply', async () => {
    const { server } = await startCoordinator(config)
    running.push(server)
    const b1 = await join(server.wsUrl, 'b1', 'bronze-token')
    b1.send({ type: 'demand', resources: [{ resource: 'payments', wants: 1 }] })
    expect(await b1.nextOfType('error')).toMatchObject({
      code: 'SLUICE_ERR_RESOURCE_FORBIDDEN',
      resource: 'payments',
    })
    expect(b1.closeCode).toBeUndefined()
  })

  it('closes with 4503 past the tenant’s maxClients', async () => {
    const { server } = await startCoordinator(config)
    running.push(server)
    await join(server.wsUrl, 'b1', 'bronze-token')
    const b2 = await TestClient.connect(server.wsUrl)
    clients.push(b2)
    b2.send({ type: 'hello', v: 1, clientId: 'b2', token: 'bronze-token' })
    expect(await b2.closed).toBe(4503)
  })
})
