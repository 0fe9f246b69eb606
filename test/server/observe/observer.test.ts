import fc from 'fast-check'
import { afterEach, describe, expect, it } from 'vitest'
import {
  HistoryRing,
  ResourceHistory,
  historyBytesPerResource,
  historyFields,
} from '../../../server/observe/history.js'
import { UsageBook, usageTauMs } from '../../../server/observe/usage.js'
import { TestClient } from '../../helpers/ws-client.js'
import { Cluster } from '../../helpers/cluster.js'
import { simpleConfig, startCoordinator } from '../../helpers/coordinator.js'

const cleanup: Array<() => Promise<unknown>> = []
afterEach(async () => {
  for (const c of cleanup.splice(0).reverse()) await c()
})

const values = (n: number) => historyFields.map((_, i) => n * 10 + i)

describe('history rings', () => {
  it('keeps the newest samples of a fixed-size ring, oldest first, within a time range', () => {
    const ring = new HistoryRing(1000, 3)
    for (let i = 1; i <= 5; i++) ring.push(i * 1000, values(i))
    expect(ring.count).toBe(3)
    const all = ring.range(0, Infinity)
    expect(all.t).toEqual([3000, 4000, 5000])
    expect(all.columns.capacity).toEqual([30, 40, 50])
    expect(all.columns.clients).toEqual([37, 47, 57])
    expect(ring.range(3500, 4500).t).toEqual([4000])
  })

  it('averages each minute of seconds into the minute ring, and picks the ring a range fits', () => {
    const h = new ResourceHistory()
    // Two minutes of samples: committed 10 in the first, 20 in the second; then one more.
    for (let s = 0; s < 120; s++)
      h.add(
        s * 1000,
        historyFields.map(() => (s < 60 ? 10 : 20)),
      )
    h.add(120_000, values(0))
    const minutes = h.minutes.range(0, Infinity)
    expect(minutes.t).toEqual([0, 60_000])
    expect(minutes.columns.committed).toEqual([10, 20])
    expect(h.range(0, 600_000).stepMs).toBe(1000)
    expect(h.range(0, 3_600_000).stepMs).toBe(60_000)
  })

  it('says what one resource’s history costs', () => {
    // 15 min by the second and 24 h by the minute, 8 fields as float32 plus a float64 time.
    expect(historyBytesPerResource).toBe((900 + 1440) * (8 + 4 * 8))
    expect(historyBytesPerResource).toBeLessThan(100 * 1024)
  })
})

describe('usage rates', () => {
  it('read a steady stream as its rate, never above it, whatever the report windows', () => {
    fc.assert(
      fc.property(
        fc.double({ min: 0.1, max: 1e6, noNaN: true }),
        fc.array(fc.integer({ min: 20, max: 5000 }), { minLength: 1, maxLength: 200 }),
        (ratePerSec, windows) => {
          const book = new UsageBook()
          let nowMs = 0
          for (const windowMs of windows) {
            nowMs += windowMs
            const admitted = (ratePerSec * windowMs) / 1000
            book.record(
              'r',
              'c',
              { windowMs, admitted, refused: 0, admittedCalls: 1, refusedCalls: 0, waiting: 0 },
              nowMs,
            )
            // Between this report and the next (due one window later), the rate holds.
            for (const at of [nowMs, nowMs + windowMs]) {
              const rate = book.current('r', at).admittedPerSec
              if (rate > ratePerSec * (1 + 1e-9)) return false
            }
          }
          const rate = book.current('r', nowMs).admittedPerSec
          // Once three time constants are covered, within 5% of the truth.
          return nowMs < 3 * usageTauMs || rate >= 0.95 * ratePerSec
        },
      ),
    )
  })

  it('fades a client that stops reporting, and says who refused within the last 5 s', () => {
    const book = new UsageBook()
    const report = {
      windowMs: 1000,
      admitted: 50,
      refused: 5,
      admittedCalls: 50,
      refusedCalls: 5,
      waiting: 2,
    }
    for (let s = 1; s <= 30; s++) book.record('r', 'c', report, s * 1000)
    expect(book.current('r', 30_000).admittedPerSec).toBeCloseTo(50, 0)
    expect(book.current('r', 30_000)).toMatchObject({ refusing: 1, waiting: 2 })
    const later = book.current('r', 60_000)
    expect(later.admittedPerSec).toBeLessThan(1)
    expect(later).toMatchObject({ refusing: 0, waiting: 0 })
    book.forgetClient('c')
    expect(book.current('r', 60_000).reporting).toBe(0)
  })

  it('says since when a client has been refusing: a run of reports with refusals ≤ 5 s apart', () => {
    const book = new UsageBook()
    const quiet = {
      windowMs: 1000,
      admitted: 10,
      refused: 0,
      admittedCalls: 10,
      refusedCalls: 0,
      waiting: 0,
    }
    const refusing = { ...quiet, refused: 3, refusedCalls: 3 }
    book.record('r', 'c', quiet, 1000)
    expect(book.client('r', 'c', 1000)?.refusingSinceMs).toBeUndefined()
    book.record('r', 'c', refusing, 2000)
    book.record('r', 'c', quiet, 3000) // a quiet report inside the run does not end it
    book.record('r', 'c', refusing, 6000)
    expect(book.client('r', 'c', 6000)).toMatchObject({
      refusingSinceMs: 2000,
      lastRefusedAtMs: 6000,
    })
    // Quiet for more than 5 s: no longer refusing; the next refusal starts a new run.
    expect(book.client('r', 'c', 11_500)?.refusingSinceMs).toBeUndefined()
    book.record('r', 'c', refusing, 12_000)
    expect(book.client('r', 'c', 12_000)?.refusingSinceMs).toBe(12_000)
  })
})

describe('usage reported by real clients', () => {
  it('shows what the limiters admitted and refused, per resource and client, in status, history and metrics', async () => {
    const cluster = new Cluster()
    await cluster.start(
      simpleConfig({ capacity: 100, burst: 100, leaseTtlMs: 5000, refreshMs: 1000 }),
    )
    cleanup.push(() => cluster.close())
    const a = await cluster.client('alpha', { name: 'checkout-1' })
    const api = a.resource('api', { wants: 100 })
    for (let i = 0; i < 3; i++) await cluster.step(100)
    expect(api.lease?.capacity).toBe(100)
    // Fifteen seconds (three of the rates' time constants): each second 150 asked of a bucket
    // refilling 100/s.
    for (let s = 0; s < 15; s++) {
      await cluster.step(1000)
      for (let i = 0; i < 150; i++) api.tryAcquire()
    }
    await cluster.step(1000)
    const { server } = cluster
    const list = (await server.http.inject('/v1/resources')).json()
    const r = list.resources.find((x: { id: string }) => x.id === 'api')
    expect(r.admittedPerSec).toBeGreaterThan(90)
    expect(r.admittedPerSec).toBeLessThanOrEqual(100)
    expect(r.refusedPerSec).toBeGreaterThan(45)
    expect(r.utilisation).toBeCloseTo(r.admittedPerSec / 100, 5)
    expect(r.refusing).toBe(1)
    const detail = (await server.http.inject('/v1/resources/api')).json()
    const alpha = detail.clientDetails[0]
    expect(alpha.name).toBe('checkout-1')
    expect(alpha.library).toMatch(/^sluice\/\d+\.\d+\.\d+$/)
    expect(alpha.usage.refusedPerSec).toBeGreaterThan(40)
    expect(alpha.usage.lastRefusedAt).toBeGreaterThan(0)
    expect(alpha.usage.refusingForMs).toBeGreaterThanOrEqual(13_000)

    const history = (await server.http.inject('/v1/resources/api/history?range=15m')).json()
    expect(history.stepMs).toBe(1000)
    expect(history.t.length).toBeGreaterThanOrEqual(5)
    expect(history.t.length).toBe(history.admitted.length)
    expect(Math.max(...history.admitted)).toBeGreaterThan(80)
    expect(Math.max(...history.refused)).toBeGreaterThan(40)
    expect(history.capacity.at(-1)).toBe(100)
    const bad = await server.http.inject('/v1/resources/api/history?range=3d')
    expect(bad.statusCode).toBe(400)
    // Polling for what is newer than the last sample: empty until the next one, not an error.
    const next = await server.http.inject(`/v1/resources/api/history?from=${history.t.at(-1) + 1}`)
    expect(next.statusCode).toBe(200)
    expect(next.json().t).toEqual([])
    await cluster.step(1000)
    const after = await server.http.inject(`/v1/resources/api/history?from=${history.t.at(-1) + 1}`)
    expect(after.json().t).toHaveLength(1)
    const backwards = await server.http.inject('/v1/resources/api/history?from=2000&to=1000')
    expect(backwards.statusCode).toBe(400)

    // Per client: its rates every 5 s over the last 5 minutes.
    const mine = (await server.http.inject('/v1/resources/api/history?client=alpha')).json()
    expect(mine).toMatchObject({ id: 'api', client: 'alpha', stepMs: 5000 })
    expect(mine.t.length).toBeGreaterThanOrEqual(3)
    expect(mine.t.length).toBe(mine.refused.length)
    expect(mine.t[1] - mine.t[0]).toBe(5000)
    expect(Math.max(...mine.admitted)).toBeGreaterThan(80)
    expect(mine.refused.at(-1)).toBeGreaterThan(40)
    const nobody = await server.http.inject('/v1/resources/api/history?client=nobody')
    expect(nobody.statusCode).toBe(404)

    const metrics = (await server.http.inject('/metrics')).body
    const admitted = /sluice_admitted_total\{resource="api",tenant=""\} (\d+)/.exec(metrics)
    expect(Number(admitted?.[1])).toBeGreaterThan(300)
    expect(metrics).toMatch(/sluice_refused_total\{resource="api",tenant=""\} \d+/)
    expect(metrics).toMatch(/sluice_refused_per_second\{resource="api"\} [\d.]+/)
  })

  it('counts slots in flight for a concurrency resource', async () => {
    const cluster = new Cluster()
    await cluster.start(simpleConfig({ kind: 'concurrency', capacity: 10 }))
    cleanup.push(() => cluster.close())
    const a = await cluster.client('alpha')
    const db = a.resource('api', { kind: 'concurrency', wants: 10 })
    for (let i = 0; i < 3; i++) await cluster.step(100)
    for (let i = 0; i < 12; i++) db.tryAcquire()
    await cluster.step(100) // one report period
    const r = (await cluster.server.http.inject('/v1/resources')).json().resources[0]
    expect(r.inFlight).toBe(10)
    expect(r.refusing).toBe(1)
    // For slots, the limit is used by what is in flight: 10 of 10.
    expect(r.utilisation).toBe(1)
    const alpha = (await cluster.server.http.inject('/v1/resources/api')).json().clientDetails[0]
    expect(alpha.usage.refusingForMs).toBe(0)
    expect(alpha.usage.lastRefusedAgoMs).toBe(0)
    await cluster.step(100)
    const later = (await cluster.server.http.inject('/v1/resources/api')).json().clientDetails[0]
    expect(later.usage.lastRefusedAgoMs).toBe(100)
    expect((await cluster.server.http.inject('/metrics')).body).toMatch(
      /sluice_in_flight\{resource="api"\} 10/,
    )
  })

  it('keeps history for at most maxHistoryResources resources', async () => {
    const { server, clock } = await startCoordinator({
      server: { limits: { roundDebounceMs: 0, maxHistoryResources: 2 } },
      resources: [{ match: '*', kind: 'rate', capacity: 10, learningMs: 0, unsafeLearning: true }],
    })
    cleanup.push(() => server.close())
    const c = await TestClient.connect(server.wsUrl)
    cleanup.push(async () => c.ws.terminate())
    await c.hello('a')
    c.send({
      type: 'demand',
      resources: ['r1', 'r2', 'r3'].map((resource) => ({ resource, wants: 1 })),
    })
    await c.flush()
    clock.advance(1000)
    expect(server.coordinator.observer.historyCount).toBe(2)
  })

  it('refuses a report whose usage is out of bounds (4400), like any bad frame', async () => {
    const { server } = await startCoordinator(simpleConfig())
    cleanup.push(() => server.close())
    const c = await TestClient.connect(server.wsUrl)
    cleanup.push(async () => c.ws.terminate())
    await c.hello('a')
    c.send({
      type: 'demand',
      resources: [
        {
          resource: 'api',
          wants: 1,
          usage: {
            windowMs: 1000,
            admitted: -1,
            refused: 0,
            admittedCalls: 0,
            refusedCalls: 0,
            waiting: 0,
          },
        },
      ],
    })
    expect(await c.closed).toBe(4400) // SLUICE_ERR_PROTO_MALFORMED
  })
})

describe('tenants', () => {
  it('lists each configured tenant with what its clients hold, and a tenant sees only its own', async () => {
    const cluster = new Cluster()
    await cluster.start({
      ...simpleConfig({ capacity: 300 }),
      tenants: {
        shop: { token: 'shop-token-123', weight: 2, caps: { api: 120 }, maxClients: 5 },
        search: { token: 'search-token-123' },
      },
    })
    cleanup.push(() => cluster.close())
    const shop = await cluster.client('s1', { token: 'shop-token-123' })
    const other = await cluster.client('s2', { token: 'shop-token-123' })
    const search = await cluster.client('q1', { token: 'search-token-123' })
    shop.resource('api', { wants: 100 })
    other.resource('api', { wants: 100 })
    search.resource('api', { wants: 50 })
    for (let i = 0; i < 5; i++) await cluster.step(100)
    const inject = (token: string) =>
      cluster.server.http.inject({
        url: '/v1/tenants',
        headers: { authorization: `Bearer ${token}` },
      })
    expect((await cluster.server.http.inject('/v1/tenants')).statusCode).toBe(401)
    const own = (await inject('shop-token-123')).json()
    expect(own.tenants.map((t: { name: string }) => t.name)).toEqual(['shop'])
    const [t] = own.tenants
    expect(t).toMatchObject({ weight: 2, maxClients: 5, clients: 2, priorities: [0, 0] })
    expect(t.resources).toEqual([
      expect.objectContaining({ id: 'api', cap: 120, clients: 2, wants: 200, lease: 120 }),
    ])
    // A tenant reads its own clients' recent rates, not another tenant's.
    await cluster.step(1000)
    const recent = (token: string, client: string) =>
      cluster.server.http.inject({
        url: `/v1/resources/api/history?client=${client}`,
        headers: { authorization: `Bearer ${token}` },
      })
    expect((await recent('shop-token-123', 's1')).statusCode).toBe(200)
    expect((await recent('search-token-123', 's1')).statusCode).toBe(404)
    const searchOwn = (await inject('search-token-123')).json().tenants
    expect(searchOwn).toEqual([
      expect.objectContaining({
        name: 'search',
        clients: 1,
        resources: [expect.objectContaining({ cap: null, wants: 50, lease: 50 })],
      }),
    ])
  })
})
