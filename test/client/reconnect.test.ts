import { afterEach, describe, expect, it } from 'vitest'
import { WebSocketServer } from 'ws'
import { createClient } from '../../client/index.js'
import type { ConfigInput } from '../../server/config/index.js'
import { Cluster, Load } from '../helpers/cluster.js'

const config = (learningMs = 0): ConfigInput => ({
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
      refreshMs: 100,
      graceMs: 200,
      learningMs,
      unsafeLearning: true,
    },
  ],
})

let cluster: Cluster | undefined
const extra: Array<() => Promise<unknown>> = []
afterEach(async () => {
  for (const e of extra.splice(0)) await e()
  await cluster?.close()
  cluster = undefined
})

describe('client reconnects', () => {
  it('rebuilds a restarted coordinator from the holdings clients report in their hello, staying leased throughout', async () => {
    cluster = new Cluster()
    await cluster.start(config())
    const resources = await Promise.all(
      ['a', 'b', 'c'].map(async (id) => (await cluster!.client(id)).resource('api')),
    )
    const loads = resources.map((r) => new Load(r, 400))
    for (let t = 0; t < 300; t += 10) {
      for (const l of loads) l.tick(10)
      await cluster.step(10)
    }
    expect(resources.map((r) => r.lease?.capacity)).toEqual([100, 100, 100])

    const port = cluster.port
    await cluster.stop()
    await cluster.start(config(500), port)
    await cluster.reconnected()
    // The new coordinator learned what each client holds: all of capacity, nothing granted twice.
    expect(cluster.committed('api')).toBe(300)
    expect(resources.map((r) => r.mode)).toEqual(['leased', 'leased', 'leased'])
    for (let t = 0; t < 800; t += 10) {
      for (const l of loads) l.tick(10)
      await cluster.step(10)
      expect(cluster.committed('api')).toBeLessThanOrEqual(300)
    }
    expect(resources.map((r) => r.mode)).toEqual(['leased', 'leased', 'leased'])
    expect(resources.map((r) => r.lease?.capacity)).toEqual([100, 100, 100])
  })

  it('follows a redirect to another coordinator', async () => {
    cluster = new Cluster()
    await cluster.start(config())
    // A follower that knows the leader: answers every hello with a redirect.
    const follower = new WebSocketServer({ host: '127.0.0.1', port: 0 })
    extra.push(() => new Promise((resolve) => follower.close(resolve)))
    await new Promise((resolve) => follower.once('listening', resolve))
    follower.on('connection', (ws) => {
      ws.on('message', () => {
        ws.send(JSON.stringify({ type: 'redirect', url: cluster!.server.wsUrl }))
        ws.close(1000)
      })
    })
    const address = follower.address() as { port: number }
    const client = createClient({
      url: `ws://127.0.0.1:${address.port}/v1/connect`,
      clientId: 'r',
      clock: cluster.clock,
    })
    cluster.clients.push(client)
    const api = client.resource('api')
    await cluster.reconnected()
    await cluster.step(0)
    await cluster.step(0)
    expect(api.lease?.capacity).toBe(300)
  })

  it('frees its capacity at the coordinator at once on close()', async () => {
    cluster = new Cluster()
    await cluster.start(config())
    const a = await cluster.client('a')
    const b = await cluster.client('b')
    const ra = a.resource('api')
    b.resource('api')
    for (let t = 0; t < 200; t += 10) {
      new Load(ra, 1000).tick(10)
      await cluster.step(10)
    }
    expect(cluster.committed('api')).toBeGreaterThan(0)
    await a.close()
    cluster.clients.splice(cluster.clients.indexOf(a), 1)
    await b.roundTrip()
    const left = cluster.server.coordinator.view.clients('api').map((c) => c.id)
    expect(left.includes('a')).toBe(false)
    await expect(ra.acquire()).rejects.toMatchObject({ code: 'SLUICE_ERR_CLIENT_CLOSED' })
  })
})
