import { Agent, createServer, request, type Server } from 'node:http'
import type { AddressInfo } from 'node:net'
import Fastify from 'fastify'
import { afterEach, describe, expect, it } from 'vitest'
import {
  createRateLimitMiddleware,
  fastifyRateLimit,
  policyHeader,
  rateLimitHeader,
} from '../../../client/http/index.js'
import { TokenBucketLimiter } from '../../../shared/limiters/index.js'
import { ManualClock } from '../../../shared/index.js'
import { Cluster } from '../../helpers/cluster.js'

const cleanup: Array<() => Promise<unknown>> = []
afterEach(async () => {
  for (const c of cleanup.splice(0)) await c()
})

function appWith(clock: ManualClock, extra: Record<string, unknown> = {}) {
  const app = Fastify()
  cleanup.push(() => app.close())
  void app.register(fastifyRateLimit, {
    limiter: () => new TokenBucketLimiter({ ratePerSec: 1, burst: 2, clock }),
    policy: { quota: 2, windowSec: 2 },
    clock,
    ...extra,
  })
  app.get('/hello', async () => ({ hello: 'world' }))
  app.get('/free', { config: { rateLimit: false } }, async () => 'free')
  app.get(
    '/strict',
    {
      config: {
        rateLimit: {
          limiter: () => new TokenBucketLimiter({ ratePerSec: 1, burst: 1, clock }),
          policy: { name: 'strict', quota: 1, windowSec: 1 },
          clock,
        },
      },
    },
    async () => 'strict',
  )
  return app
}

describe('IETF RateLimit header fields', () => {
  it('formats policy and state as structured fields', () => {
    expect(policyHeader({ name: 'per-ip', quota: 100, windowSec: 60 })).toBe('"per-ip";q=100;w=60')
    expect(rateLimitHeader({ quota: 100, windowSec: 60 }, 42.7, 2.1)).toBe('"default";r=42;t=3')
  })
})

describe('fastifyRateLimit', () => {
  it('lets requests through under the limit with RateLimit-Policy and RateLimit headers', async () => {
    const app = appWith(new ManualClock())
    const res = await app.inject('/hello')
    expect(res.statusCode).toBe(200)
    expect(res.headers['ratelimit-policy']).toBe('"default";q=2;w=2')
    // One token left; the bucket is full again in 1 s (t: seconds until the quota resets).
    expect(res.headers.ratelimit).toBe('"default";r=1;t=1')
  })

  it('answers 429 with Retry-After and a coded JSON body once over the limit, and lets through again later', async () => {
    const clock = new ManualClock()
    const app = appWith(clock)
    await app.inject('/hello')
    await app.inject('/hello')
    const refused = await app.inject('/hello')
    expect(refused.statusCode).toBe(429)
    expect(refused.headers['retry-after']).toBe('1')
    expect(refused.headers.ratelimit).toBe('"default";r=0;t=2')
    expect(refused.json()).toEqual({
      error: {
        code: 'SLUICE_ERR_HTTP_RATE_LIMITED',
        message: 'rate limit exceeded',
        retryable: true,
        limit: 'default',
      },
    })
    clock.advance(1000)
    expect((await app.inject('/hello')).statusCode).toBe(200)
  })

  it('keys by IP by default, or by a header', async () => {
    const clock = new ManualClock()
    const byIp = appWith(clock)
    for (let i = 0; i < 2; i++) await byIp.inject({ url: '/hello', remoteAddress: '10.0.0.1' })
    expect((await byIp.inject({ url: '/hello', remoteAddress: '10.0.0.1' })).statusCode).toBe(429)
    expect((await byIp.inject({ url: '/hello', remoteAddress: '10.0.0.2' })).statusCode).toBe(200)

    const byHeader = appWith(clock, { key: { header: 'x-api-key' } })
    for (let i = 0; i < 2; i++)
      await byHeader.inject({ url: '/hello', headers: { 'x-api-key': 'a' } })
    expect(
      (await byHeader.inject({ url: '/hello', headers: { 'x-api-key': 'a' } })).statusCode,
    ).toBe(429)
    expect(
      (await byHeader.inject({ url: '/hello', headers: { 'x-api-key': 'b' } })).statusCode,
    ).toBe(200)
  })

  it('keys one keep-alive connection by its peer, or with trustProxy by each request’s X-Forwarded-For', async () => {
    // The peer's address is read once per connection (it never changes); behind a trusted
    // proxy one connection carries many clients, so each request is keyed on its own.
    const statuses = async (
      trustProxy: boolean,
    ): Promise<{ codes: number[]; reused: boolean[] }> => {
      const app = Fastify({ trustProxy })
      cleanup.push(() => app.close())
      await app.register(fastifyRateLimit, {
        limiter: () =>
          new TokenBucketLimiter({ ratePerSec: 1, burst: 1, clock: new ManualClock() }),
      })
      app.get('/hello', async () => 'hello')
      await app.listen({ host: '127.0.0.1', port: 0 })
      const { port } = app.server.address() as AddressInfo
      const agent = new Agent({ keepAlive: true, maxSockets: 1 })
      cleanup.push(async () => agent.destroy())
      const codes: number[] = []
      const reused: boolean[] = []
      for (const from of ['10.0.0.1', '10.0.0.2', '10.0.0.1']) {
        await new Promise<void>((resolve, reject) => {
          const req = request(
            {
              host: '127.0.0.1',
              port,
              path: '/hello',
              agent,
              headers: { 'x-forwarded-for': from },
            },
            (res) => {
              codes.push(res.statusCode!)
              reused.push(req.reusedSocket)
              res.resume()
              res.once('end', resolve)
            },
          )
          req.once('error', reject)
          req.end()
        })
      }
      return { codes, reused }
    }
    const direct = await statuses(false)
    expect(direct.reused).toEqual([false, true, true])
    expect(direct.codes).toEqual([200, 429, 429])
    const proxied = await statuses(true)
    expect(proxied.reused).toEqual([false, true, true])
    expect(proxied.codes).toEqual([200, 200, 429])
  })

  it('honours per-route config: off, or a route’s own limiter and policy', async () => {
    const app = appWith(new ManualClock())
    for (let i = 0; i < 5; i++) expect((await app.inject('/free')).statusCode).toBe(200)
    expect((await app.inject('/strict')).headers['ratelimit-policy']).toBe('"strict";q=1;w=1')
    expect((await app.inject('/strict')).statusCode).toBe(429)
  })

  it('never limits allow-listed keys or skipped requests', async () => {
    const app = appWith(new ManualClock(), { allowList: ['10.9.9.9'] })
    for (let i = 0; i < 5; i++)
      expect((await app.inject({ url: '/hello', remoteAddress: '10.9.9.9' })).statusCode).toBe(200)
    const skipping = appWith(new ManualClock(), { skip: () => true })
    for (let i = 0; i < 5; i++) expect((await skipping.inject('/hello')).statusCode).toBe(200)
  })

  it('shapes: delays a request up to maxDelayMs instead of refusing it', async () => {
    const clock = new ManualClock()
    const limiter = new TokenBucketLimiter({ ratePerSec: 1, burst: 1, clock })
    const app = appWith(clock, {
      limiter: () => limiter,
      mode: 'shape',
      maxDelayMs: 2000,
      policy: { quota: 1, windowSec: 1 },
    })
    expect((await app.inject('/hello')).statusCode).toBe(200)
    const delayed = app.inject('/hello')
    while (limiter.waiting === 0) await new Promise((resolve) => process.nextTick(resolve))
    clock.advance(1000)
    expect((await delayed).statusCode).toBe(200)
  })

  it('refuses a bad option set at registration, naming the problem', async () => {
    const app = Fastify()
    cleanup.push(() => app.close())
    await expect(
      app.register(fastifyRateLimit, {
        limiter: () => new TokenBucketLimiter({ ratePerSec: 1 }),
        mode: 'shapee' as 'shape',
      }),
    ).rejects.toThrow(/mode.*"shapee"/)
  })
})

describe('createRateLimitMiddleware on plain node:http', () => {
  it('answers 429 with the headers from a real server on 127.0.0.1:0', async () => {
    const clock = new ManualClock()
    const limit = createRateLimitMiddleware({
      limiter: () => new TokenBucketLimiter({ ratePerSec: 1, burst: 1, clock }),
      policy: { quota: 1, windowSec: 1 },
      clock,
    })
    const server: Server = createServer((req, res) => {
      void limit(req, res).then((ok) => {
        if (ok) res.end('ok')
      })
    })
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
    cleanup.push(() => new Promise((resolve) => server.close(resolve)))
    const { port } = server.address() as { port: number }
    const first = await fetch(`http://127.0.0.1:${port}/x`)
    expect(first.status).toBe(200)
    expect(await first.text()).toBe('ok')
    const second = await fetch(`http://127.0.0.1:${port}/x`)
    expect(second.status).toBe(429)
    expect(second.headers.get('retry-after')).toBe('1')
    expect(second.headers.get('ratelimit-policy')).toBe('"default";q=1;w=1')
    expect(((await second.json()) as { error: { code: string } }).error.code).toBe(
      'SLUICE_ERR_HTTP_RATE_LIMITED',
    )
  })

  it('calls next() Express-style when the request may go on', async () => {
    const mw = createRateLimitMiddleware({
      limiter: () => new TokenBucketLimiter({ ratePerSec: 1 }),
      policy: { quota: 1, windowSec: 1 },
    })
    let called = 0
    const res = { setHeader: () => undefined } as never
    await mw(
      { headers: {}, url: '/', socket: { remoteAddress: '1.2.3.4' } } as never,
      res,
      () => called++,
    )
    expect(called).toBe(1)
  })
})

describe('a cluster-wide limit at the edge', () => {
  it('limits a route through a coordinated resource leased from a real coordinator', async () => {
    const cluster = new Cluster()
    cleanup.push(() => cluster.close())
    await cluster.start({
      server: { limits: { roundDebounceMs: 0 } },
      resources: [
        {
          match: 'search',
          kind: 'rate',
          capacity: 10,
          burst: 10,
          leaseTtlMs: 1000,
          refreshMs: 100,
          graceMs: 200,
          learningMs: 0,
          unsafeLearning: true,
        },
      ],
    })
    const client = await cluster.client('gateway')
    const search = client.resource('search', { wants: 10 })
    for (let i = 0; i < 3; i++) await cluster.step(100)
    expect(search.lease?.capacity).toBe(10)
    await cluster.step(1000) // fill the bucket to its burst
    const app = Fastify()
    cleanup.push(() => app.close())
    await app.register(fastifyRateLimit, { resource: search })
    app.get('/search', async () => 'results')
    const codes: number[] = []
    for (let i = 0; i < 12; i++) codes.push((await app.inject('/search')).statusCode)
    expect(codes.filter((c) => c === 200)).toHaveLength(10)
    expect(codes.filter((c) => c === 429)).toHaveLength(2)
    expect((await app.inject('/search')).headers['ratelimit-policy']).toBe('"search";q=10;w=1')
    // headers: 'ietf-lean': the resource's policy on its first response and on refusals only.
    await cluster.step(1000) // the bucket refills
    const lean = Fastify()
    cleanup.push(() => lean.close())
    await lean.register(fastifyRateLimit, { resource: search, headers: 'ietf-lean' })
    lean.get('/search', async () => 'results')
    const first = await lean.inject('/search')
    expect(first.statusCode).toBe(200)
    expect(first.headers['ratelimit-policy']).toBe('"search";q=10;w=1')
    expect(first.headers.ratelimit).toMatch(/^"search";r=\d+;t=\d+$/)
    const second = await lean.inject('/search')
    expect(second.statusCode).toBe(200)
    expect(second.headers['ratelimit-policy']).toBeUndefined()
    expect(second.headers.ratelimit).toMatch(/^"search";r=\d+;t=\d+$/)
    let last = second
    for (let i = 0; i < 12 && last.statusCode === 200; i++) last = await lean.inject('/search')
    expect(last.statusCode).toBe(429)
    expect(last.headers['ratelimit-policy']).toBe('"search";q=10;w=1')
  })

  it("states the resource's limit, not this process's share of it, in every header set", async () => {
    const cluster = new Cluster()
    cleanup.push(() => cluster.close())
    await cluster.start({
      server: { limits: { roundDebounceMs: 0 } },
      resources: [
        {
          match: 'search',
          kind: 'rate',
          capacity: 100,
          burst: 100,
          refreshMs: 100,
          learningMs: 0,
          unsafeLearning: true,
        },
      ],
    })
    // Two gateways asking for all of it: each is leased half.
    const [a, b] = [await cluster.client('gw-a'), await cluster.client('gw-b')]
    const search = a.resource('search', { wants: 100 })
    b.resource('search', { wants: 100 })
    for (let i = 0; i < 5; i++) await cluster.step(100)
    expect(search.lease?.capacity).toBeCloseTo(50, 6)
    const app = Fastify()
    cleanup.push(() => app.close())
    await app.register(fastifyRateLimit, { resource: search, headers: 'both' })
    app.get('/search', async () => 'results')
    const res = await app.inject('/search')
    expect(res.statusCode).toBe(200)
    expect(res.headers['ratelimit-policy']).toBe('"search";q=100;w=1')
    expect(res.headers['x-ratelimit-limit']).toBe('100')
    // The limit outlives a lapse: the coordinator gone, what the caller is held to is unchanged.
    await cluster.stop()
    for (let i = 0; i < 60 && search.mode === 'leased'; i++) await cluster.step(1000)
    expect(search.mode).not.toBe('leased')
    expect((await app.inject('/search')).headers['ratelimit-policy']).toBe('"search";q=100;w=1')
  })
})

describe('the middleware in Express', () => {
  async function express3(trustProxy: boolean): Promise<{ codes: number[]; warned: string[] }> {
    const { default: express } = await import('express')
    const app = express()
    if (trustProxy) app.set('trust proxy', 1)
    const clock = new ManualClock()
    app.use(
      createRateLimitMiddleware({
        limiter: () => new TokenBucketLimiter({ ratePerSec: 1, burst: 1, clock }),
        clock,
      }),
    )
    app.get('/hello', (_req, res) => {
      res.send('hello')
    })
    const server = await new Promise<Server>((resolve) => {
      const s = app.listen(0, '127.0.0.1', () => resolve(s))
    })
    cleanup.push(() => new Promise((resolve) => server.close(resolve)))
    const warned: string[] = []
    const onWarning = (w: Error & { code?: string }): void => void warned.push(w.code ?? '')
    process.on('warning', onWarning)
    const { port } = server.address() as AddressInfo
    const codes: number[] = []
    // Three callers behind one load balancer: the same socket address, their own X-Forwarded-For.
    for (const ip of ['203.0.113.1', '203.0.113.2', '203.0.113.3']) {
      const res = await fetch(`http://127.0.0.1:${port}/hello`, {
        headers: { 'x-forwarded-for': ip },
      })
      codes.push(res.status)
    }
    await new Promise((resolve) => process.nextTick(resolve))
    process.off('warning', onWarning)
    return { codes, warned }
  }

  it("keys by req.ip, which follows Express's trust proxy: three callers behind a proxy, three keys", async () => {
    expect((await express3(true)).codes).toEqual([200, 200, 200])
  })

  it('says so, once, when X-Forwarded-For comes and trust proxy is off (every caller one key)', async () => {
    const { codes, warned } = await express3(false)
    expect(codes).toEqual([200, 429, 429])
    expect(warned.filter((c) => c === 'SLUICE_ERR_HTTP_TRUST_PROXY')).toHaveLength(1)
  })
})
