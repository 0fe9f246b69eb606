import { describe, expect, it } from 'vitest'
import type { ConfigInput } from '../../server/config/index.js'
import { closedAfterEach, startCoordinator } from '../helpers/coordinator.js'
import { TestClient } from '../helpers/ws-client.js'

// The coordinator against a hostile tenant and an unauthenticated peer, over real sockets.

const { running, clients } = closedAfterEach()

const config = (server: Record<string, unknown> = {}): ConfigInput => ({
  server: { limits: { roundDebounceMs: 0 }, adminToken: 'admin-token-1', ...server },
  tenants: {
    a: { token: 'tenant-a-token', weight: 1 },
    b: { token: 'tenant-b-token', weight: 1, priorities: [0, 2] },
  },
  resources: [
    {
      match: 'apikey/*',
      keyed: true,
      kind: 'rate',
      capacity: 10,
      learningMs: 0,
      unsafeLearning: true,
    },
    {
      match: 'mail',
      kind: 'quota',
      capacity: 100,
      window: '1h',
      learningMs: 0,
      unsafeLearning: true,
    },
    {
      match: 'api',
      kind: 'rate',
      capacity: 1000,
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

async function join(url: string, id: string, token: string) {
  const c = await TestClient.connect(url)
  clients.push(c)
  await c.hello(id, { token })
  return c
}

describe('security against a hostile tenant', () => {
  it('refuses a priority outside the tenant’s range, so no tenant can starve another by its band', async () => {
    const { server, clock } = await startCoordinator(config())
    running.push(server)
    const a = await join(server.wsUrl, 'a1', 'tenant-a-token')
    const b = await join(server.wsUrl, 'b1', 'tenant-b-token')
    a.send({ type: 'demand', resources: [{ resource: 'api', wants: 1000 }] })
    b.send({ type: 'demand', resources: [{ resource: 'api', wants: 1000, priority: 1_000_000 }] })
    expect(await b.nextOfType('error')).toMatchObject({
      code: 'SLUICE_ERR_AUTH_PRIORITY',
      resource: 'api',
    })
    // a's range is [0, 0] (the default): 1 is refused too.
    a.send({ type: 'demand', resources: [{ resource: 'api', wants: 1000, priority: 1 }] })
    expect(await a.nextOfType('error')).toMatchObject({ code: 'SLUICE_ERR_AUTH_PRIORITY' })
    // Inside its range, b's band is its own business; a still gets its weighted share.
    b.send({ type: 'demand', resources: [{ resource: 'api', wants: 1000, priority: 0 }] })
    await b.flush()
    clock.advance(0)
    const shares = await Promise.all(
      [a, b].map(async (c) => (await c.nextLease('api')).leases[0]!.capacity),
    )
    expect(shares[0]).toBeGreaterThanOrEqual(500)
  })

  it('refuses a reload that would turn authentication off, unless the new config says so', async () => {
    const { server } = await startCoordinator(config())
    running.push(server)
    const open: ConfigInput = { resources: [{ match: 'api', kind: 'rate', capacity: 10 }] }
    const res = await server.http.inject({
      method: 'POST',
      url: '/v1/admin/reload',
      headers: { authorization: 'Bearer admin-token-1' },
      payload: open,
    })
    expect(res.statusCode).toBe(400)
    expect(res.json().error.code).toBe('SLUICE_ERR_CONFIG_DOWNGRADE')
    expect(res.json().error.message).toContain('server.adminToken removed')
    expect(res.json().error.message).toContain('tenants removed')
    expect(Object.keys(server.coordinator.config.tenants)).toEqual(['a', 'b'])
    const allowed = await server.http.inject({
      method: 'POST',
      url: '/v1/admin/reload',
      headers: { authorization: 'Bearer admin-token-1' },
      payload: { ...open, server: { securityDowngrade: true } },
    })
    expect(allowed.statusCode).toBe(200)
    expect(server.coordinator.config.tenants).toEqual({})
  })

  it('protects status and metrics: the read or admin token sees all, a tenant only its own clients, nobody else anything', async () => {
    const { server, clock } = await startCoordinator(config({ readToken: 'read-token-1' }))
    running.push(server)
    const a = await join(server.wsUrl, 'a1', 'tenant-a-token')
    const b = await join(server.wsUrl, 'b1', 'tenant-b-token')
    for (const c of [a, b]) {
      c.send({ type: 'demand', resources: [{ resource: 'api', wants: 100 }] })
      await c.flush()
    }
    clock.advance(0)
    await a.nextLease('api')
    const get = (url: string, token?: string) =>
      server.http.inject({
        url,
        headers: token === undefined ? {} : { authorization: `Bearer ${token}` },
      })
    for (const url of ['/v1/resources', '/v1/resources/api', '/metrics']) {
      const res = await get(url)
      expect(res.statusCode, url).toBe(401)
      expect(res.json().error.code).toBe('SLUICE_ERR_HTTP_UNAUTHORIZED')
      expect(res.body).not.toContain('a1')
    }
    for (const token of ['read-token-1', 'admin-token-1']) {
      expect((await get('/metrics', token)).statusCode).toBe(200)
      const ids = (await get('/v1/resources/api', token))
        .json()
        .clientDetails.map((c: { id: string }) => c.id)
      expect(ids.sort()).toEqual(['a1', 'b1'])
    }
    const mine = (await get('/v1/resources/api', 'tenant-a-token')).json()
    expect(mine.clientDetails.map((c: { id: string }) => c.id)).toEqual(['a1'])
    expect((await get('/metrics', 'tenant-a-token')).statusCode).toBe(403)
    // Health and readiness stay open for load balancers.
    expect((await get('/healthz')).statusCode).toBe(200)
    expect((await get('/readyz')).statusCode).toBe(200)
    // ... but say how many resources learn, not which: names are for readers with a token.
    const ready = (await get('/readyz')).json()
    expect(ready).not.toHaveProperty('learning')
    expect(ready.learningCount).toEqual(expect.any(Number))
  })

  it('slows token guessing to the configured rate per address, on WebSocket and HTTP alike', async () => {
    const { server, clock } = await startCoordinator(
      config({ limits: { roundDebounceMs: 0, authFailuresPerSec: 1, authFailureBurst: 3 } }),
    )
    running.push(server)
    const attempt = async (token: string): Promise<number> => {
      const c = await TestClient.connect(server.wsUrl)
      clients.push(c)
      c.send({ type: 'hello', v: 1, clientId: 'guesser', token })
      return c.closed
    }
    // The burst of 3 wrong guesses is checked (4401); after that, refused unchecked (4430),
    // even with the right token.
    expect([
      await attempt('guess-0001'),
      await attempt('guess-0002'),
      await attempt('guess-0003'),
    ]).toEqual([4401, 4401, 4401])
    expect(await attempt('guess-0004')).toBe(4430)
    expect(await attempt('tenant-a-token')).toBe(4430)
    const http = await server.http.inject({
      url: '/v1/resources',
      headers: { authorization: 'Bearer nope-nope' },
    })
    expect(http.statusCode).toBe(429)
    expect(http.json().error.code).toBe('SLUICE_ERR_AUTH_RATE_LIMITED')
    // One more attempt per second.
    clock.advance(1000)
    const honest = await TestClient.connect(server.wsUrl)
    clients.push(honest)
    await honest.hello('a1', { token: 'tenant-a-token' })
    expect(honest.closeCode).toBeUndefined()
    const metrics = (
      await server.http.inject({
        url: '/metrics',
        headers: { authorization: 'Bearer admin-token-1' },
      })
    ).body
    expect(metrics).toMatch(/^sluice_auth_failures_total\{surface="websocket"\} 3$/m)
    expect(metrics).toMatch(/^sluice_auth_throttled_total\{surface="websocket"\} 2$/m)
  })

  it('keeps throttling a guesser across a reload', async () => {
    const { server } = await startCoordinator(
      config({ limits: { roundDebounceMs: 0, authFailuresPerSec: 0.01, authFailureBurst: 2 } }),
    )
    running.push(server)
    const attempt = async (token: string): Promise<number> => {
      const c = await TestClient.connect(server.wsUrl)
      clients.push(c)
      c.send({ type: 'hello', v: 1, clientId: 'guesser', token })
      return c.closed
    }
    expect([await attempt('guess-0001'), await attempt('guess-0002')]).toEqual([4401, 4401])
    expect(await attempt('guess-0003')).toBe(4430)
    // A reload (even one that changes the guard's own limits) does not hand out new attempts.
    await server.reload(
      config({ limits: { roundDebounceMs: 0, authFailuresPerSec: 0.02, authFailureBurst: 3 } }),
    )
    expect(await attempt('guess-0004')).toBe(4430)
  })

  it('bounds the resources one tenant may use, so it cannot lock the others out', async () => {
    const { server, clock } = await startCoordinator({
      ...config({ limits: { roundDebounceMs: 0, maxResources: 4 } }),
      resources: [
        { match: 'r/*', kind: 'rate', capacity: 10, learningMs: 0, unsafeLearning: true },
      ],
    })
    running.push(server)
    const a = await join(server.wsUrl, 'a1', 'tenant-a-token')
    // Two tenants: each may use half of maxResources.
    a.send({
      type: 'demand',
      resources: ['r/1', 'r/2', 'r/3', 'r/4'].map((resource) => ({ resource, wants: 1 })),
    })
    const refused = await a.nextOfType('error')
    expect(refused).toMatchObject({
      code: 'SLUICE_ERR_LIMIT_RESOURCES',
      resource: 'r/3',
      resources: ['r/3', 'r/4'],
    })
    const b = await join(server.wsUrl, 'b1', 'tenant-b-token')
    b.send({ type: 'demand', resources: [{ resource: 'r/9', wants: 1 }] })
    await b.flush()
    clock.advance(0)
    // Spread surplus: b alone on r/9 is leased all of it.
    expect((await b.nextLease('r/9')).leases[0]!.capacity).toBe(10)
  })

  it('refuses a report of a key the key rule refuses, whatever client sends it, and keeps the connection', async () => {
    const { server, clock } = await startCoordinator(config())
    running.push(server)
    const a = await join(server.wsUrl, 'a1', 'tenant-a-token')
    a.send({
      type: 'demand',
      resources: [
        { resource: 'apikey/*', wants: 1 },
        { resource: `apikey/${'x'.repeat(1000)}`, wants: 100 },
        { resource: 'apikey/ok-key', wants: 100 },
      ],
    })
    const error = await a.nextOfType('error')
    expect(error).toMatchObject({ code: 'SLUICE_ERR_KEY_INVALID' })
    expect(error.resource).toBe(`apikey/${'x'.repeat(1000)}`)
    // The well-formed key of the same frame is leased, and the connection stays.
    await a.flush()
    clock.advance(10)
    expect((await a.nextLease('apikey/ok-key')).leases.length).toBeGreaterThan(0)
    expect(a.closeCode).toBeUndefined()
  })

  it('closes a connection whose report says used without the window it is of (4400), as the protocol says', async () => {
    const { server } = await startCoordinator(config())
    running.push(server)
    const a = await join(server.wsUrl, 'a1', 'tenant-a-token')
    a.send({ type: 'demand', resources: [{ resource: 'mail', wants: 1, used: 1e15 }] })
    expect(await a.closed).toBe(4400)
  })
})
