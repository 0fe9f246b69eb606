import Fastify, { type FastifyInstance } from 'fastify'
import { afterEach, describe, expect, it } from 'vitest'
import { fastifyRateLimit } from '../../../client/http/index.js'
import { Cluster } from '../../helpers/cluster.js'

// A per-IP limit made cluster-wide with one option: `resource: client.keyed('ip')` in the fastify
// plugin of three gateway processes (three apps, each with its own client), one coordinator.

let cluster: Cluster | undefined
const apps: ReturnType<typeof Fastify>[] = []
afterEach(async () => {
  for (const app of apps.splice(0)) await app.close()
  await cluster?.close()
  cluster = undefined
})

describe('the HTTP edge with a keyed family', () => {
  it('holds each IP to its limit across every gateway, and says the configured limit in its headers', async () => {
    cluster = new Cluster()
    await cluster.start({
      server: { limits: { roundDebounceMs: 0 } },
      resources: [
        {
          match: 'ip/*',
          keyed: true,
          kind: 'rate',
          capacity: 6,
          leaseTtlMs: 1000,
          refreshMs: 100,
          graceMs: 200,
          learningMs: 0,
          unsafeLearning: true,
        },
      ],
    })
    const gateways = await Promise.all(
      ['g1', 'g2', 'g3'].map(async (id) => {
        const client = await cluster!.client(id)
        const family = client.keyed('ip')
        const app = Fastify({ trustProxy: true })
        apps.push(app)
        await app.register(fastifyRateLimit, { resource: family, clock: cluster!.clock })
        app.get('/hello', async () => 'hello')
        return { app, family }
      }),
    )
    for (let i = 0; i < 20 && gateways.some((g) => !((g.family.lease?.capacity ?? 0) > 0.3)); i++)
      await cluster.step(50)
    // A share that moved earns its burst (the process it came from may have spent it): a burst's
    // refill (1 s) on, every gateway holds its third of every new key's burst.
    for (let t = 0; t < 1000; t += 100) await cluster.step(100)
    // One caller, 1.2.3.4, hits every gateway in turn, far faster than its 6/s. A refused check
    // may wait a round trip for the key's lease (it may be moving to its gateway): the clock
    // steps while it does.
    let admitted = 0
    let first: Record<string, unknown> | undefined
    const startMs = cluster.clock.now()
    for (let n = 0; n < 60; n++) {
      const g = gateways[n % 3]!
      const res = await cluster.stepUntil(
        g.app.inject({
          url: '/hello',
          headers: { 'x-forwarded-for': '1.2.3.4' },
        }),
      )
      if (res.statusCode === 200) admitted++
      first ??= res.headers
      if (n % 3 === 2) await cluster.step(10)
    }
    // At most the burst (6) plus 6/s for the time that passed, across the three gateways.
    const elapsedSec = (cluster.clock.now() - startMs) / 1000
    expect(admitted, `in ${elapsedSec} s`).toBeLessThanOrEqual(6 + Math.floor(6 * elapsedSec))
    // The burst, a third at each gateway (what a central limiter admits at once), less rounding.
    expect(admitted).toBeGreaterThanOrEqual(5)
    // The policy is the key's configured limit, not a gateway's share of it.
    expect(first?.['ratelimit-policy']).toBe('"ip";q=6;w=1')
    // Remaining is the key's across the cluster as well as a gateway knows it: its part (a
    // third of the burst, 2) scaled to the key, as if the others were spent as it is: after
    // the first request 1 of 2 here, so 3 of 6 (a central bucket says 5; this gateway alone
    // would admit 1 more: `remaining: 'here'`).
    expect(first?.['ratelimit']).toBe('"ip";r=3;t=1')
    // Another IP is a limit of its own, decided at once.
    const other = await gateways[0]!.app.inject({
      url: '/hello',
      headers: { 'x-forwarded-for': '5.6.7.8' },
    })
    expect(other.statusCode).toBe(200)
  })

  it('answers a key the family cannot hold with 400, and a request without a key as missingKey says', async () => {
    cluster = new Cluster()
    await cluster.start({
      server: { limits: { roundDebounceMs: 0 } },
      resources: [
        {
          match: 'apikey/*',
          keyed: true,
          kind: 'rate',
          capacity: 6,
          learningMs: 0,
          unsafeLearning: true,
        },
      ],
    })
    const client = await cluster.client('g')
    const family = client.keyed('apikey')
    const make = async (extra: Record<string, unknown>): Promise<FastifyInstance> => {
      const app = Fastify()
      apps.push(app)
      await app.register(fastifyRateLimit, {
        resource: family,
        key: { header: 'x-api-key' },
        clock: cluster!.clock,
        ...extra,
      })
      app.get('/v1/data', async () => 'data')
      return app
    }
    const refuse = await make({})
    const skip = await make({ missingKey: 'skip' })
    const shared = await make({ missingKey: { key: 'anonymous' } })
    for (let i = 0; i < 20 && !((family.lease?.capacity ?? 0) > 0.99); i++) await cluster.step(50)
    await cluster.step(2000)
    const get = (app: FastifyInstance, key?: string) =>
      app.inject({ url: '/v1/data', headers: key === undefined ? {} : { 'x-api-key': key } })
    for (const bad of ['bad\u0085key', 'k'.repeat(300), '*']) {
      const res = await get(refuse, bad)
      expect(res.statusCode, bad.slice(0, 8)).toBe(400)
      expect(res.json()).toMatchObject({ error: { code: 'SLUICE_ERR_KEY_INVALID' } })
    }
    expect(family.size).toBe(0)
    const none = await get(refuse)
    expect(none.statusCode).toBe(400)
    expect(none.json()).toMatchObject({ error: { code: 'SLUICE_ERR_HTTP_NO_KEY' } })
    expect((await get(skip)).statusCode).toBe(200)
    // One shared bucket for every request without a key: its burst, then 429.
    const statuses: number[] = []
    for (let i = 0; i < 10; i++) statuses.push((await get(shared)).statusCode)
    expect(statuses.filter((s) => s === 200)).toHaveLength(6)
    expect(statuses.slice(6)).toEqual([429, 429, 429, 429])
    expect(family.size).toBe(1)
  })
})
