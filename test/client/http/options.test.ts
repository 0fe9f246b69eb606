import { createServer, type Server } from 'node:http'
import { connect, type AddressInfo } from 'node:net'
import Fastify, { type FastifyInstance } from 'fastify'
import { afterEach, describe, expect, it } from 'vitest'
import {
  createRateLimitMiddleware,
  derivePolicy,
  fastifyRateLimit,
  ipKey,
  policyFits,
  type LimitContext,
  type RateLimitOptions,
} from '../../../client/http/index.js'
import { FixedWindow, TokenBucketLimiter } from '../../../shared/limiters/index.js'
import { ManualClock } from '../../../shared/index.js'
import { Cluster } from '../../helpers/cluster.js'

const cleanup: Array<() => Promise<unknown>> = []
afterEach(async () => {
  for (const c of cleanup.splice(0)) await c()
})

function app(): FastifyInstance {
  const a = Fastify()
  cleanup.push(() => a.close())
  return a
}

/** An app limited per key by a bucket of `burst` (refilling 1/s), with a /hello route. */
async function limited(
  clock: ManualClock,
  options: Record<string, unknown> = {},
  burst = 2,
): Promise<FastifyInstance> {
  const a = app()
  await a.register(fastifyRateLimit, {
    limiter: () => new TokenBucketLimiter({ ratePerSec: 1, burst, clock }),
    clock,
    ...options,
  })
  a.get('/hello', async () => 'hello')
  a.get('/fail', async (_req, reply) => reply.code(500).send('broken'))
  return a
}

async function codes(a: FastifyInstance, n: number, extra: object = {}): Promise<number[]> {
  const out: number[] = []
  for (let i = 0; i < n; i++) out.push((await a.inject({ url: '/hello', ...extra })).statusCode)
  return out
}

describe('options are checked strictly, at registration', () => {
  it.each([
    [{ keyGenerator: () => 'x' }, /keyGenerator.*key: \(req\) => string/],
    [{ max: 100 }, /max.*client\.keyed\('<prefix>'\).*per: '1m'.*TokenBucketLimiter/],
    [{ timeWindow: 1000 }, /timeWindow.*client\.keyed.*kind: quota.*window: '1m'.*windowMs/],
    [{ windowMs: 60_000 }, /windowMs.*client\.keyed.*kind: quota/],
    [{ store: {} }, /store.*client\.keyed\('<prefix>'\) for a per-key limit/],
    [{ errorResponseBuilder: () => ({}) }, /errorResponseBuilder.*errorResponse/],
    [{ onExceeded: () => undefined }, /onExceeded.*onLimited/],
    [{ handler: () => undefined }, /handler is the middleware’s.*errorResponse/],
    [{ standardHeaders: 'draft-7' }, /standardHeaders.*headers: 'draft-6' \| 'draft-7'/],
    [{ headers: 'draft-9' }, /headers.*"draft-9"/],
    [{ ban: 3 }, /ban.*blockMs/],
    [{ alowList: [] }, /alowList.*allowList/],
    [{ mode: 'shapee' }, /mode.*"shapee"/],
    [{ headers: 'draft' }, /headers.*"draft"/],
    [{ statusCode: 200 }, /statusCode/],
    [{ ipv6Subnet: 129 }, /ipv6Subnet/],
    [{ skipSuccessfulRequests: 'yes' }, /skipSuccessfulRequests/],
  ])('refuses %o with a message that says what is meant', async (bad, message) => {
    const a = app()
    await expect(
      a.register(fastifyRateLimit, {
        limiter: () => new TokenBucketLimiter({ ratePerSec: 1 }),
        ...bad,
      } as RateLimitOptions),
    ).rejects.toThrow(message)
  })

  it('refuses a bad route config when the route is declared, naming the route', async () => {
    const a = app()
    await a.register(fastifyRateLimit, { limiter: () => new TokenBucketLimiter({ ratePerSec: 1 }) })
    expect(() =>
      a.get('/search', { config: { rateLimit: { mode: 'fast' as 'shape' } } }, async () => 'x'),
    ).toThrow(/route GET \/search: config\.rateLimit: mode/)
  })

  it('refuses a policy the limiter does not keep, and the skip options without a local limiter', async () => {
    await expect(
      app().register(fastifyRateLimit, {
        limiter: () => new TokenBucketLimiter({ ratePerSec: 5 }),
        policy: { quota: 1000, windowSec: 1 },
      }),
    ).rejects.toThrow(/policy \{ quota: 1000, windowSec: 1 \} is not what the limiter admits/)
    const cluster = new Cluster()
    cleanup.push(() => cluster.close())
    await cluster.start({ resources: [{ match: 'search', kind: 'rate', capacity: 10 }] })
    const search = (await cluster.client('gw')).resource('search')
    await expect(
      app().register(fastifyRateLimit, { resource: search, skipFailedRequests: true }),
    ).rejects.toThrow(/not given back: add a limiter/)
    await expect(app().register(fastifyRateLimit, {})).rejects.toThrow(/give `limiter`/)
  })
})

describe('route options merge over the plugin’s', () => {
  it('keeps the plugin’s limiter under a route that changes only the cost, and drops it with limiter: false', async () => {
    const clock = new ManualClock()
    const a = app()
    await a.register(fastifyRateLimit, {
      limiter: () => new TokenBucketLimiter({ ratePerSec: 1, burst: 4, clock }),
      clock,
    })
    a.get('/heavy', { config: { rateLimit: { cost: 2 } } }, async () => 'heavy')
    a.get(
      '/own',
      {
        config: {
          rateLimit: {
            limiter: () => new TokenBucketLimiter({ ratePerSec: 1, burst: 1, clock }),
            policy: { name: 'own', quota: 1, windowSec: 1 },
          },
        },
      },
      async () => 'own',
    )
    const heavy = []
    for (let i = 0; i < 3; i++) heavy.push((await a.inject('/heavy')).statusCode)
    expect(heavy).toEqual([200, 200, 429]) // 4 tokens, 2 per request
    expect((await a.inject('/own')).headers['ratelimit-policy']).toBe('"own";q=1;w=1')
    expect((await a.inject('/own')).statusCode).toBe(429)
  })

  it('finds each route’s options without building routeOptions on every request', async () => {
    // routeOptions costs about 700 instructions a request (docs/benchmarks.md): the plugin reads
    // fastify's route context instead. A hook before the plugin's counts any routeOptions read.
    const clock = new ManualClock()
    const a = app()
    let reads = 0
    a.addHook('onRequest', (req, _reply, done) => {
      // The prototype that defines routeOptions; a getter on the request shadows it.
      let owner: object | null = req
      while (owner !== null && !Object.hasOwn(owner, 'routeOptions'))
        owner = Object.getPrototypeOf(owner) as object | null
      expect(owner).not.toBeNull()
      Object.defineProperty(req, 'routeOptions', {
        get() {
          reads++
          return Reflect.get(owner!, 'routeOptions', req) as unknown
        },
      })
      done()
    })
    await a.register(fastifyRateLimit, {
      limiter: () => new TokenBucketLimiter({ ratePerSec: 1, burst: 1, clock }),
      clock,
    })
    a.get('/free', { config: { rateLimit: false } }, async () => 'free')
    a.get('/limited', async () => 'limited')
    a.get(
      '/own',
      { config: { rateLimit: { policy: { name: 'own', quota: 1, windowSec: 1 } } } },
      async () => 'own',
    )
    expect([(await a.inject('/free')).statusCode, (await a.inject('/free')).statusCode]).toEqual([
      200, 200,
    ])
    expect([
      (await a.inject('/limited')).statusCode,
      (await a.inject('/limited')).statusCode,
    ]).toEqual([200, 429])
    expect((await a.inject('/own')).headers['ratelimit-policy']).toBe('"own";q=1;w=1')
    expect(reads).toBe(0)
  })

  it('applies the plugin’s per-IP limit and a route’s cluster-wide resource together', async () => {
    const cluster = new Cluster()
    cleanup.push(() => cluster.close())
    await cluster.start({
      server: { limits: { roundDebounceMs: 0 } },
      resources: [
        {
          match: 'search',
          kind: 'rate',
          capacity: 5,
          burst: 5,
          leaseTtlMs: 1000,
          refreshMs: 100,
          graceMs: 200,
          learningMs: 0,
          unsafeLearning: true,
        },
      ],
    })
    const search = (await cluster.client('gateway')).resource('search', { wants: 5 })
    for (let i = 0; i < 3; i++) await cluster.step(100)
    await cluster.step(1000) // the bucket fills to its burst
    const clock = new ManualClock()
    const a = app()
    await a.register(fastifyRateLimit, {
      limiter: () => new TokenBucketLimiter({ ratePerSec: 1, burst: 3, clock }),
      policy: { name: 'per-ip', quota: 3, windowSec: 3 },
      clock,
    })
    a.get('/search', { config: { rateLimit: { resource: search } } }, async () => 'results')
    a.get('/free', { config: { rateLimit: { resource: search, limiter: false } } }, async () => 1)
    const from = async (ip: string) =>
      (await a.inject({ url: '/search', remoteAddress: ip })).statusCode
    // One IP gets its 3 though the shared resource has 5.
    expect([await from('10.0.0.1'), await from('10.0.0.1'), await from('10.0.0.1')]).toEqual([
      200, 200, 200,
    ])
    const fourth = await a.inject({ url: '/search', remoteAddress: '10.0.0.1' })
    expect(fourth.statusCode).toBe(429)
    expect(fourth.headers['ratelimit-policy']).toBe('"per-ip";q=3;w=3, "search";q=5;w=1')
    expect(fourth.headers.ratelimit).toMatch(/^"per-ip";r=0;t=\d+, "search";r=2;t=\d+$/)
    // Another IP has its own 3, but the shared resource has only 2 left: the third is
    // refused by the resource, and the per-IP bucket is not charged for it.
    expect([await from('10.0.0.2'), await from('10.0.0.2'), await from('10.0.0.2')]).toEqual([
      200, 200, 429,
    ])
    const after = await a.inject({ url: '/search', remoteAddress: '10.0.0.2' })
    expect(after.headers.ratelimit).toMatch(/^"per-ip";r=1;/)
    // limiter: false: only the resource applies (and it is spent).
    expect((await a.inject('/free')).statusCode).toBe(429)
    expect((await a.inject('/free')).headers['ratelimit-policy']).toBe('"search";q=5;w=1')
  })
})

describe('header sets and the policy', () => {
  it("ietf-lean: RateLimit on every response, RateLimit-Policy on a key's first and on refusals", async () => {
    const clock = new ManualClock()
    const a = await limited(clock, { headers: 'ietf-lean' })
    const first = await a.inject('/hello')
    expect(first.headers['ratelimit-policy']).toBe('"default";q=2;w=2')
    expect(first.headers.ratelimit).toBe('"default";r=1;t=1')
    const second = await a.inject('/hello')
    expect(second.statusCode).toBe(200)
    expect(second.headers['ratelimit-policy']).toBeUndefined()
    expect(second.headers.ratelimit).toBe('"default";r=0;t=2')
    const refused = await a.inject('/hello')
    expect(refused.statusCode).toBe(429)
    expect(refused.headers['ratelimit-policy']).toBe('"default";q=2;w=2')
    expect(refused.headers['retry-after']).toBe('1')
    // Another client: its key is new, so its first response states the policy too.
    const other = await a.inject({ url: '/hello', remoteAddress: '10.0.0.2' })
    expect(other.statusCode).toBe(200)
    expect(other.headers['ratelimit-policy']).toBe('"default";q=2;w=2')
    const otherAgain = await a.inject({ url: '/hello', remoteAddress: '10.0.0.2' })
    expect(otherAgain.headers['ratelimit-policy']).toBeUndefined()
    expect(otherAgain.headers['x-ratelimit-limit']).toBeUndefined()
  })

  it('ietf-lean: a key forgotten and back states the policy again; a shaped first request states it', async () => {
    const clock = new ManualClock()
    const a = await limited(clock, { headers: 'ietf-lean', maxKeys: 1 })
    const from = (ip: string) => a.inject({ url: '/hello', remoteAddress: ip })
    expect((await from('10.0.0.1')).headers['ratelimit-policy']).toBe('"default";q=2;w=2')
    expect((await from('10.0.0.1')).headers['ratelimit-policy']).toBeUndefined()
    // One key at most: 10.0.0.2 pushes 10.0.0.1 out, which comes back to a new limiter.
    expect((await from('10.0.0.2')).headers['ratelimit-policy']).toBe('"default";q=2;w=2')
    const back = await from('10.0.0.1')
    expect(back.headers['ratelimit-policy']).toBe('"default";q=2;w=2')
    expect(back.headers.ratelimit).toBe('"default";r=1;t=1')

    // Shaping: a key's first request waits for its limiter (made empty here), then states the policy.
    let made: TokenBucketLimiter | undefined
    const s = app()
    await s.register(fastifyRateLimit, {
      limiter: () => {
        made = new TokenBucketLimiter({ ratePerSec: 10, burst: 1, clock })
        made.tryAcquire(1)
        return made
      },
      clock,
      mode: 'shape',
      maxDelayMs: 1000,
      headers: 'ietf-lean',
    })
    s.get('/hello', async () => 'hello')
    const waiting = s.inject('/hello')
    while (made === undefined || made.waiting === 0)
      await new Promise((resolve) => process.nextTick(resolve))
    clock.advance(100)
    const shaped = await waiting
    expect(shaped.statusCode).toBe(200)
    expect(shaped.headers['ratelimit-policy']).toBe('"default";q=10;w=1')
  })

  it('the RateLimit field follows r and t when they repeat, from one key to another, and when they change', async () => {
    const clock = new ManualClock()
    const a = app()
    // 0.5 tokens a second, 3 at most: t (seconds to full) can differ for the same r.
    await a.register(fastifyRateLimit, {
      limiter: () => new TokenBucketLimiter({ ratePerSec: 0.5, burst: 3, clock }),
      clock,
    })
    a.get('/hello', async () => 'hello')
    const ratelimit = async (ip: string) =>
      (await a.inject({ url: '/hello', remoteAddress: ip })).headers.ratelimit
    expect(await ratelimit('10.0.0.1')).toBe('"default";r=2;t=2')
    expect(await ratelimit('10.0.0.2')).toBe('"default";r=2;t=2')
    expect(await ratelimit('10.0.0.1')).toBe('"default";r=1;t=4')
    clock.advance(500)
    expect(await ratelimit('10.0.0.3')).toBe('"default";r=2;t=2')
    clock.advance(500)
    // 10.0.0.2: 2.5 tokens, 1.5 left (3 s to full); 10.0.0.3: 2.25, 1.25 left (3.5 s: 4).
    expect(await ratelimit('10.0.0.2')).toBe('"default";r=1;t=3')
    expect(await ratelimit('10.0.0.3')).toBe('"default";r=1;t=4')
    expect(await ratelimit('10.0.0.1')).toBe('"default";r=0;t=5')
  })

  it('sends the IETF fields by default, X-RateLimit-* with legacy, both, or none', async () => {
    const clock = new ManualClock()
    const ietf = await (await limited(clock)).inject('/hello')
    expect(ietf.headers['ratelimit-policy']).toBe('"default";q=2;w=2')
    expect(ietf.headers['x-ratelimit-limit']).toBeUndefined()
    const legacy = await (await limited(clock, { headers: 'legacy' })).inject('/hello')
    expect(legacy.headers).toMatchObject({
      'x-ratelimit-limit': '2',
      'x-ratelimit-remaining': '1',
      'x-ratelimit-reset': '1',
    })
    expect(legacy.headers.ratelimit).toBeUndefined()
    const both = await (await limited(clock, { headers: 'both' })).inject('/hello')
    expect(both.headers.ratelimit).toBe('"default";r=1;t=1')
    expect(both.headers['x-ratelimit-remaining']).toBe('1')
    const none = await limited(clock, { headers: 'none' }, 1)
    await none.inject('/hello')
    const refused = await none.inject('/hello')
    expect(refused.statusCode).toBe(429)
    expect(Object.keys(refused.headers).filter((h) => h.includes('ratelimit'))).toEqual([])
    expect(refused.headers['retry-after']).toBe('1')
  })

  it('derives the policy from the limiter, and accepts a stated one that tells the truth', () => {
    expect(derivePolicy({ ratePerSec: 20, burst: 40 })).toEqual({ quota: 40, windowSec: 2 })
    expect(derivePolicy(new FixedWindow({ limit: 100, windowMs: 60_000 }).describe())).toEqual({
      quota: 100,
      windowSec: 60,
    })
    expect(derivePolicy({ ratePerSec: 10, burst: 1 })).toEqual({ quota: 10, windowSec: 1 })
    expect(policyFits({ quota: 40, windowSec: 2 }, { ratePerSec: 20, burst: 40 })).toBe(true)
    expect(policyFits({ quota: 80, windowSec: 2 }, { ratePerSec: 20, burst: 40 })).toBe(true)
    expect(policyFits({ quota: 81, windowSec: 2 }, { ratePerSec: 20, burst: 40 })).toBe(false)
    expect(policyFits({ quota: 39, windowSec: 2 }, { ratePerSec: 20, burst: 40 })).toBe(false)
  })
})

describe('refusals: status, body and hooks', () => {
  it('answers with the status and body given, and calls onLimited and onExceeding', async () => {
    const clock = new ManualClock()
    const limitedCalls: LimitContext[] = []
    const exceeding: string[] = []
    const a = await limited(
      clock,
      {
        statusCode: 503,
        errorResponse: (_req: unknown, ctx: LimitContext) => ({
          message: `slow down, retry in ${ctx.retryAfterSec} s`,
        }),
        onLimited: (_req: unknown, ctx: LimitContext) => limitedCalls.push(ctx),
        onExceeding: (_req: unknown, key: string) => exceeding.push(key),
      },
      1,
    )
    await a.inject({ url: '/hello', remoteAddress: '10.1.1.1' })
    const refused = await a.inject({ url: '/hello', remoteAddress: '10.1.1.1' })
    expect(refused.statusCode).toBe(503)
    expect(refused.json()).toEqual({ message: 'slow down, retry in 1 s' })
    expect(exceeding).toEqual(['10.1.1.1'])
    expect(limitedCalls).toEqual([
      { key: '10.1.1.1', statusCode: 503, retryAfterSec: 1, blocked: false, limit: 'default' },
    ])
    const text = await limited(clock, { errorResponse: () => 'too many' }, 1)
    await text.inject('/hello')
    const plain = await text.inject('/hello')
    expect(plain.statusCode).toBe(429)
    expect(plain.body).toBe('too many')
  })

  it('blocks a refused key for blockMs, whatever its limiter would say', async () => {
    const clock = new ManualClock()
    const seen: LimitContext[] = []
    const a = await limited(
      clock,
      { blockMs: 10_000, onLimited: (_r: unknown, c: LimitContext) => seen.push(c) },
      1,
    )
    expect(await codes(a, 2)).toEqual([200, 429])
    clock.advance(5_000) // the bucket is full again, but the key is blocked
    const blocked = await a.inject('/hello')
    expect(blocked.statusCode).toBe(429)
    expect(blocked.headers['retry-after']).toBe('5')
    expect(seen.at(-1)?.blocked).toBe(true)
    expect(await codes(a, 1, { remoteAddress: '10.0.0.9' })).toEqual([200]) // other keys are not
    clock.advance(5_000)
    expect(await codes(a, 1)).toEqual([200])
  })

  it('never ends a block before the window that refused: a client obeying Retry-After is let in', async () => {
    // The plan example of docs/http.md: a 60 s fixed window of 1, blockMs 10 s.
    const clock = new ManualClock()
    const a = app()
    await a.register(fastifyRateLimit, {
      limiter: () => new FixedWindow({ limit: 1, windowMs: 60_000, clock }),
      blockMs: 10_000,
      clock,
    })
    a.get('/hello', async () => 'hello')
    expect((await a.inject('/hello')).statusCode).toBe(200)
    const first = await a.inject('/hello')
    expect(first.statusCode).toBe(429)
    expect(first.headers['retry-after']).toBe('60')
    clock.advance(1_000)
    const during = await a.inject('/hello')
    expect(during.statusCode).toBe(429)
    // The block says what the window says (59 s), not what is left of its own 10 s, and states
    // the policy as every refusal does.
    expect(during.headers['retry-after']).toBe('59')
    expect(during.headers['ratelimit-policy']).toBeDefined()
    clock.advance(59_000)
    expect((await a.inject('/hello')).statusCode).toBe(200)
  })
})

describe('what counts', () => {
  it('gives back the cost of successful requests (skipSuccessfulRequests) or failed ones (skipFailedRequests)', async () => {
    const clock = new ManualClock()
    const ok = await limited(clock, { skipSuccessfulRequests: true }, 2)
    expect(await codes(ok, 5)).toEqual([200, 200, 200, 200, 200])
    for (let i = 0; i < 2; i++) expect((await ok.inject('/fail')).statusCode).toBe(500)
    expect((await ok.inject('/fail')).statusCode).toBe(429) // failures count
    const failed = await limited(clock, { skipFailedRequests: true }, 2)
    for (let i = 0; i < 4; i++) expect((await failed.inject('/fail')).statusCode).toBe(500)
    expect(await codes(failed, 3)).toEqual([200, 200, 429])
  })

  it('gives costs back on a route whose own options say so, declared after the plugin or before it', async () => {
    const clock = new ManualClock()
    const bucket = (burst: number) => () => new TokenBucketLimiter({ ratePerSec: 1, burst, clock })
    const own = { rateLimit: { limiter: bucket(1), skipSuccessfulRequests: true } }
    // Before: the route is declared while the plugin is still queued, so the plugin meets it
    // on its first request (no onRoute); after: the plugin sees it declared.
    const before = app()
    before.get('/own', { config: own }, async () => 'own')
    before.get('/hello', async () => 'hello')
    await before.register(fastifyRateLimit, { limiter: bucket(1), clock })
    const after = app()
    await after.register(fastifyRateLimit, { limiter: bucket(1), clock })
    after.get('/own', { config: own }, async () => 'own')
    after.get('/hello', async () => 'hello')
    // One rateLimit object shared by a route declared before the plugin and one after it.
    const both = app()
    both.get('/own', { config: own }, async () => 'own')
    await both.register(fastifyRateLimit, { limiter: bucket(1), clock })
    both.get('/own2', { config: own }, async () => 'own2')
    both.get('/hello', async () => 'hello')
    for (const [a, paths] of [
      [before, ['/own']],
      [after, ['/own']],
      [both, ['/own', '/own2']],
    ] as const) {
      for (const path of paths) {
        const own5 = []
        for (let i = 0; i < 5; i++) own5.push((await a.inject(path)).statusCode)
        expect(own5).toEqual([200, 200, 200, 200, 200]) // each success gave its token back
      }
      expect(await codes(a, 2)).toEqual([200, 429]) // the plugin's own options do not
    }
  })

  it('keeps the cost of a request whose client went away before its response, wherever the route was declared', async () => {
    // A hostile client under skipSuccessfulRequests: it aborts each request, whose response
    // would have been a success. Real sockets: the abort is a closed TCP connection.
    const clock = new ManualClock()
    const bucket = () => new TokenBucketLimiter({ ratePerSec: 1, burst: 1, clock })
    const own = { rateLimit: { limiter: bucket, skipSuccessfulRequests: true } }
    const globally = { limiter: bucket, skipSuccessfulRequests: true, clock }
    const arrangements: Array<[string, (a: FastifyInstance, route: () => void) => Promise<void>]> =
      [
        // Declared before the plugin, with its own options: its response is watched.
        [
          'route first',
          async (a, route) => {
            route()
            await a.register(fastifyRateLimit, { limiter: bucket, clock })
          },
        ],
        [
          'plugin first',
          async (a, route) => {
            await a.register(fastifyRateLimit, { limiter: bucket, clock })
            route()
          },
        ],
        [
          'plugin options',
          async (a, route) => {
            await a.register(fastifyRateLimit, globally)
            route()
          },
        ],
      ]
    for (const [name, arrange] of arrangements) {
      const a = app()
      let entered!: () => void
      const inHandler = new Promise<void>((resolve) => (entered = resolve))
      let release!: () => void
      const gate = new Promise<void>((resolve) => (release = resolve))
      let answered!: () => void
      const handlerDone = new Promise<void>((resolve) => (answered = resolve))
      let calls = 0
      await arrange(a, () =>
        a.get('/slow', { config: name === 'plugin options' ? {} : own }, async (req, reply) => {
          if (calls++ > 0) return 'at once' // only the first request waits for its client to go
          const gone = new Promise((resolve) => req.raw.socket.once('close', resolve))
          entered()
          await gone
          await gate
          void reply.send('late')
          answered()
          return reply
        }),
      )
      await a.listen({ host: '127.0.0.1', port: 0 })
      const socket = connect((a.server.address() as AddressInfo).port, '127.0.0.1')
      socket.on('error', () => undefined)
      socket.write('GET /slow HTTP/1.1\r\nHost: x\r\n\r\n')
      await inHandler
      socket.destroy()
      release()
      await handlerDone
      // The aborted request's token was not given back: the next is refused.
      expect([name, (await a.inject('/slow')).statusCode]).toEqual([name, 429])
    }
  })

  it('gives each plan its own quota: the limiter is made from the key’s first request', async () => {
    const clock = new ManualClock()
    const plans: Record<string, number> = { free: 2, pro: 5 }
    const a = app()
    await a.register(fastifyRateLimit, {
      key: { header: 'x-api-key' },
      limiter: (_key, req) => {
        const burst = plans[String(req.headers['x-plan'])] ?? 1
        return new TokenBucketLimiter({ ratePerSec: burst / 60, burst, clock })
      },
      clock,
    })
    a.get('/hello', async () => 'hello')
    const as = (key: string, plan: string) => ({ headers: { 'x-api-key': key, 'x-plan': plan } })
    expect(await codes(a, 3, as('k1', 'free'))).toEqual([200, 200, 429])
    expect(await codes(a, 6, as('k2', 'pro'))).toEqual([200, 200, 200, 200, 200, 429])
    const pro = await a.inject({ url: '/hello', ...as('k3', 'pro') })
    expect(pro.headers['ratelimit-policy']).toBe('"default";q=5;w=60')
  })

  it('keys IPv6 clients by their /64 (ipv6Subnet), IPv4-mapped ones by their IPv4', async () => {
    expect(ipKey('2001:db8:1:2:aaaa::1', 64)).toBe('2001:db8:1:2:0:0:0:0/64')
    expect(ipKey('2001:db8:1:2:bbbb:cccc:dddd:eeee', 64)).toBe('2001:db8:1:2:0:0:0:0/64')
    expect(ipKey('2001:db8:1:3::1', 64)).toBe('2001:db8:1:3:0:0:0:0/64')
    expect(ipKey('2001:db8:1:2ff::1', 56)).toBe('2001:db8:1:200:0:0:0:0/56')
    expect(ipKey('::1', 64)).toBe('0:0:0:0:0:0:0:0/64')
    expect(ipKey('::ffff:10.1.2.3', 64)).toBe('10.1.2.3')
    expect(ipKey('64:ff9b::10.1.2.3', 128)).toBe('64:ff9b::10.1.2.3')
    expect(ipKey('fe80::1%eth0', 64)).toBe('fe80:0:0:0:0:0:0:0/64')
    expect(ipKey('2001:db8::1', false)).toBe('2001:db8::1')
    expect(ipKey('10.0.0.1', 64)).toBe('10.0.0.1')
    const clock = new ManualClock()
    const a = await limited(clock, {}, 2)
    expect(await codes(a, 1, { remoteAddress: '2001:db8:1:2::1' })).toEqual([200])
    expect(await codes(a, 2, { remoteAddress: '2001:db8:1:2::ffff' })).toEqual([200, 429])
    expect(await codes(a, 1, { remoteAddress: '2001:db8:1:3::1' })).toEqual([200])
    const perAddress = await limited(clock, { ipv6Subnet: false }, 1)
    expect(await codes(perAddress, 1, { remoteAddress: '2001:db8:1:2::1' })).toEqual([200])
    expect(await codes(perAddress, 1, { remoteAddress: '2001:db8:1:2::2' })).toEqual([200])
  })
})

describe('createRateLimitMiddleware', () => {
  it('checks its options, answers with the chosen status and text body, and gives back successes', async () => {
    expect(() =>
      createRateLimitMiddleware({
        limiter: () => new TokenBucketLimiter({ ratePerSec: 1 }),
        keyGenerator: () => 'x',
      } as RateLimitOptions),
    ).toThrow(/keyGenerator.*key: \(req\) => string/)
    const clock = new ManualClock()
    const limit = createRateLimitMiddleware({
      limiter: () => new TokenBucketLimiter({ ratePerSec: 1, burst: 1, clock }),
      statusCode: 503,
      errorResponse: () => 'busy',
      skipSuccessfulRequests: true,
      headers: 'legacy',
      clock,
    })
    const server: Server = createServer((req, res) => {
      void limit(req, res).then((ok) => {
        if (!ok) return
        res.statusCode = req.url === '/fail' ? 500 : 200
        res.end('done')
      })
    })
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
    cleanup.push(() => new Promise((resolve) => server.close(resolve)))
    const { port } = server.address() as { port: number }
    const url = (path: string) => `http://127.0.0.1:${port}${path}`
    for (let i = 0; i < 3; i++) {
      const res = await fetch(url('/ok'))
      expect(res.status).toBe(200)
      await res.text()
    }
    expect((await fetch(url('/fail'))).status).toBe(500)
    const refused = await fetch(url('/ok'))
    expect(refused.status).toBe(503)
    expect(await refused.text()).toBe('busy')
    expect(refused.headers.get('x-ratelimit-limit')).toBe('1')
    expect(refused.headers.get('x-ratelimit-remaining')).toBe('0')
  })

  it('keeps the cost of a request whose client went away before its response', async () => {
    const clock = new ManualClock()
    const limit = createRateLimitMiddleware({
      limiter: () => new TokenBucketLimiter({ ratePerSec: 1, burst: 1, clock }),
      skipSuccessfulRequests: true,
      clock,
    })
    let entered!: () => void
    const inHandler = new Promise<void>((resolve) => (entered = resolve))
    let answered!: () => void
    const handlerDone = new Promise<void>((resolve) => (answered = resolve))
    let calls = 0
    const server: Server = createServer((req, res) => {
      void limit(req, res).then(async (ok) => {
        if (!ok) return
        if (calls++ > 0) return void res.end('at once')
        // The first waits for its client to go, then answers a success nobody reads.
        const gone = new Promise((resolve) => req.socket.once('close', resolve))
        entered()
        await gone
        res.end('late')
        answered()
      })
    })
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
    cleanup.push(() => new Promise((resolve) => server.close(resolve)))
    const { port } = server.address() as AddressInfo
    const socket = connect(port, '127.0.0.1')
    socket.on('error', () => undefined)
    socket.write('GET /slow HTTP/1.1\r\nHost: x\r\n\r\n')
    await inHandler
    socket.destroy()
    await handlerDone
    expect((await fetch(`http://127.0.0.1:${port}/slow`)).status).toBe(429)
  })
})
