import type { Server } from 'node:http'
import type { AddressInfo } from 'node:net'
import express, { type Request, type Response } from 'express'
import { rateLimit } from 'express-rate-limit'
import { afterEach, describe, expect, it } from 'vitest'
import { createRateLimitMiddleware, type RateLimitInfo } from '../../../client/http/index.js'
import { FixedWindow } from '../../../shared/limiters/index.js'
import { ManualClock } from '../../../shared/index.js'
import { dictionary } from '../../helpers/fields.js'

// The same requests against express-rate-limit (what an Express user knows) and
// Sluice's middleware, both in real Express servers on 127.0.0.1: the same
// status codes, bodies, and header fields that mean the same. express-rate-limit
// keeps wall-clock windows of its own; each scenario runs well inside one 60 s
// window, and the Sluice window (a manual clock at 0) ends 60 s from the start.

const windowMs = 60_000
const servers: Server[] = []
afterEach(async () => {
  for (const s of servers.splice(0)) await new Promise((r) => s.close(r))
})

type Handler = (req: Request, res: Response, next: (error?: unknown) => void) => unknown

async function serve(limit: Handler): Promise<string> {
  const app = express()
  app.use(limit)
  app.get('/hello', (req, res) => {
    // What a handler sees of the limit, as express-rate-limit puts it on the request.
    const info = (req as Request & { rateLimit?: RateLimitInfo }).rateLimit
    res.json(
      info === undefined ? {} : { limit: info.limit, remaining: info.remaining, used: info.used },
    )
  })
  const server = app.listen(0, '127.0.0.1')
  servers.push(server)
  await new Promise((r) => server.once('listening', r))
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}/hello`
}

interface Answer {
  readonly status: number
  readonly headers: Headers
  readonly body: string
}

async function run(url: string, n: number): Promise<Answer[]> {
  const out: Answer[] = []
  for (let i = 0; i < n; i++) {
    const res = await fetch(url)
    out.push({ status: res.status, headers: res.headers, body: await res.text() })
  }
  return out
}

const sluice = (options: Record<string, unknown>): Handler => {
  const clock = new ManualClock()
  const middleware = createRateLimitMiddleware({
    limiter: () => new FixedWindow({ limit: 3, windowMs, clock }),
    clock,
    ...options,
  })
  return (req, res, next) => void middleware(req, res, next)
}

const reference = (options: Record<string, unknown>): Handler =>
  rateLimit({ windowMs, limit: 3, legacyHeaders: false, ...options })

/** The numbers of a structured-field item's parameters (`"name"; r=2; t=59` → { r: 2, t: 59 }). */
function params(field: string | null): Record<string, number> {
  const out: Record<string, number> = {}
  for (const part of (field ?? '').split(';').slice(1)) {
    const [k, v] = part.trim().split('=')
    if (k !== undefined && v !== undefined && /^\d+$/.test(v)) out[k] = Number(v)
  }
  return out
}

const near = (a: number | undefined, b: number | undefined): boolean =>
  a !== undefined && b !== undefined && Math.abs(a - b) <= 1

describe('parity with express-rate-limit (real Express)', () => {
  it("standardHeaders: 'draft-6': RateLimit-Limit, -Remaining, -Reset and RateLimit-Policy", async () => {
    const a = await run(await serve(reference({ standardHeaders: 'draft-6' })), 5)
    const b = await run(await serve(sluice({ headers: 'draft-6' })), 5)
    for (let i = 0; i < 5; i++) {
      const at = `request ${i}`
      expect(b[i]!.status, at).toBe(a[i]!.status)
      for (const h of ['ratelimit-policy', 'ratelimit-limit', 'ratelimit-remaining'])
        expect(b[i]!.headers.get(h), `${at}: ${h}`).toBe(a[i]!.headers.get(h))
      for (const h of ['ratelimit-reset', 'retry-after']) {
        expect(b[i]!.headers.has(h), `${at}: ${h}`).toBe(a[i]!.headers.has(h))
        if (a[i]!.headers.has(h))
          expect(
            near(Number(b[i]!.headers.get(h)), Number(a[i]!.headers.get(h))),
            `${at}: ${h}`,
          ).toBe(true)
      }
      expect(b[i]!.headers.has('ratelimit'), at).toBe(false)
    }
  })

  it("standardHeaders: 'draft-7': one RateLimit field (limit, remaining, reset) and RateLimit-Policy", async () => {
    const a = await run(await serve(reference({ standardHeaders: 'draft-7' })), 5)
    const b = await run(await serve(sluice({ headers: 'draft-7' })), 5)
    for (let i = 0; i < 5; i++) {
      const at = `request ${i}`
      expect(b[i]!.status, at).toBe(a[i]!.status)
      expect(b[i]!.headers.get('ratelimit-policy'), at).toBe(a[i]!.headers.get('ratelimit-policy'))
      const [x, y] = [
        dictionary(a[i]!.headers.get('ratelimit')),
        dictionary(b[i]!.headers.get('ratelimit')),
      ]
      expect(y.limit, at).toBe(x.limit)
      expect(y.remaining, at).toBe(x.remaining)
      expect(near(y.reset, x.reset), `${at}: reset ${y.reset} vs ${x.reset}`).toBe(true)
      expect(b[i]!.headers.has('ratelimit-limit'), at).toBe(false)
    }
  })

  it("standardHeaders: 'draft-8': named RateLimit and RateLimit-Policy items with q, w, r, t", async () => {
    const a = await run(await serve(reference({ standardHeaders: 'draft-8' })), 5)
    const b = await run(await serve(sluice({ headers: 'draft-8' })), 5)
    for (let i = 0; i < 5; i++) {
      const at = `request ${i}`
      expect(b[i]!.status, at).toBe(a[i]!.status)
      // The policy's name differs (express-rate-limit's "3-in-1min", Sluice's "default") and
      // Sluice sends no partition key (pk); the numbers are the same.
      const [pa, pb] = [
        params(a[i]!.headers.get('ratelimit-policy')),
        params(b[i]!.headers.get('ratelimit-policy')),
      ]
      expect([pb.q, pb.w], at).toEqual([pa.q, pa.w])
      const [ra, rb] = [
        params(a[i]!.headers.get('ratelimit')),
        params(b[i]!.headers.get('ratelimit')),
      ]
      expect(rb.r, at).toBe(ra.r)
      expect(near(rb.t, ra.t), `${at}: t ${rb.t} vs ${ra.t}`).toBe(true)
    }
  })

  it('req.rateLimit: limit, remaining and used, as handlers read them', async () => {
    const a = await run(await serve(reference({})), 3)
    const b = await run(await serve(sluice({})), 3)
    for (let i = 0; i < 3; i++) {
      expect(a[i]!.status).toBe(200)
      expect(JSON.parse(b[i]!.body), `request ${i}`).toEqual(JSON.parse(a[i]!.body))
    }
    expect(JSON.parse(b[2]!.body)).toEqual({ limit: 3, remaining: 0, used: 3 })
  })

  it('handler(req, res, next) answers a refusal itself; message is a fixed body', async () => {
    const handler = (_req: Request, res: Response): void => {
      res.status(503).send('busy, come back later')
    }
    const a = await run(await serve(reference({ handler })), 4)
    const b = await run(await serve(sluice({ handler })), 4)
    expect(b.map((r) => r.status)).toEqual(a.map((r) => r.status))
    expect(b[3]!.body).toBe(a[3]!.body)
    expect(b[3]!.status).toBe(503)
    const c = await run(await serve(reference({ message: 'slow down' })), 4)
    const d = await run(await serve(sluice({ message: 'slow down' })), 4)
    expect(d.map((r) => r.status)).toEqual(c.map((r) => r.status))
    expect(d[3]!.body).toBe(c[3]!.body)
    const e = await run(await serve(reference({ message: { error: 'slow down' } })), 4)
    const f = await run(await serve(sluice({ message: { error: 'slow down' } })), 4)
    expect(JSON.parse(f[3]!.body)).toEqual(JSON.parse(e[3]!.body))
  })
})

describe('a window as text', () => {
  it("FixedWindow({ window: '1 minute' }) is FixedWindow({ windowMs: 60000 })", async () => {
    const clock = new ManualClock()
    const text = new FixedWindow({ limit: 2, window: '1 minute', clock })
    const ms = new FixedWindow({ limit: 2, windowMs: 60_000, clock })
    const taken = (l: FixedWindow): boolean[] => [l.tryAcquire(), l.tryAcquire(), l.tryAcquire()]
    expect(taken(text)).toEqual(taken(ms))
    expect(text.msUntil(1)).toBe(60_000)
    clock.advance(60_000)
    expect(text.tryAcquire()).toBe(true)
    expect(() => new FixedWindow({ limit: 2, window: '1 fortnight', clock })).toThrow(
      /window must be a duration.*"1 fortnight"/,
    )
  })
})

describe('the key function (#42.2)', () => {
  it("receives Express's own request and response, as keyGenerator(req, res) does", async () => {
    const seen: string[] = []
    const url = await serve(
      sluice({
        // What an express-rate-limit user writes: req.get is Express's, not node's.
        key: (req: Request, res: Response) => {
          seen.push(typeof res.setHeader)
          return req.get('x-api-key')
        },
      }),
    )
    const ask = (key: string): Promise<number> =>
      fetch(url, { headers: { 'x-api-key': key } }).then((r) => r.status)
    // Was HTTP 500 'req.get is not a function' on every request.
    expect([await ask('a'), await ask('a'), await ask('a'), await ask('a')]).toEqual([
      200, 200, 200, 429,
    ])
    expect(await ask('b')).toBe(200)
    expect(seen[0]).toBe('function')
  })

  it("receives fastify's own request and reply", async () => {
    const Fastify = (await import('fastify')).default
    const { fastifyRateLimit } = await import('../../../client/http/index.js')
    const app = Fastify()
    const clock = new ManualClock()
    let replies = 0
    await app.register(fastifyRateLimit, {
      limiter: () => new FixedWindow({ limit: 1, windowMs, clock }),
      clock,
      key: (request, reply) => {
        if (typeof (reply as { header?: unknown }).header === 'function') replies++
        // fastify's request: routeOptions and id are its own.
        return `${String(request.routeOptions.url)}:${String(request.headers['x-api-key'])}`
      },
    })
    app.get('/hello', async () => 'hello')
    const ask = async (key: string): Promise<number> =>
      (await app.inject({ url: '/hello', headers: { 'x-api-key': key } })).statusCode
    expect([await ask('a'), await ask('a'), await ask('b')]).toEqual([200, 429, 200])
    expect(replies).toBe(3)
    await app.close()
  })
})
