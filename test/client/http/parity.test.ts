import fastifyRateLimitReference from '@fastify/rate-limit'
import Fastify, { type FastifyInstance, type LightMyRequestResponse } from 'fastify'
import { afterEach, describe, expect, it } from 'vitest'
import { fastifyRateLimit } from '../../../client/http/index.js'
import { FixedWindow } from '../../../shared/limiters/index.js'
import { ManualClock } from '../../../shared/index.js'

// The same scenarios against @fastify/rate-limit (the reference a fastify user
// knows) and Sluice's plugin: the same requests must get the same status
// codes, and the header fields must mean the same. The reference keeps its own
// wall-clock windows; each scenario runs within one 60 s window, well inside it.

const windowMs = 60_000
const apps: FastifyInstance[] = []
afterEach(async () => {
  for (const a of apps.splice(0)) await a.close()
})

interface Request {
  readonly url: string
  readonly ip?: string
  readonly apiKey?: string
}

interface Scenario {
  readonly name: string
  /** Options of the reference plugin. */
  readonly reference: Record<string, unknown>
  /** Sluice's equivalent. */
  readonly sluice: (clock: ManualClock) => Record<string, unknown>
  /** Per-route config of /strict, in each dialect. */
  readonly strict?: { reference: object; sluice: (clock: ManualClock) => object }
  readonly requests: readonly Request[]
}

const window = (limit: number, clock: ManualClock) => () =>
  new FixedWindow({ limit, windowMs, clock })

const times = (n: number, r: Request): Request[] => Array.from({ length: n }, () => r)

const scenarios: Scenario[] = [
  {
    name: 'a per-IP limit: the fourth request in the window is refused, other IPs are not',
    reference: { max: 3, timeWindow: windowMs },
    sluice: (clock) => ({ limiter: window(3, clock), clock }),
    requests: [...times(5, { url: '/hello', ip: '10.0.0.1' }), { url: '/hello', ip: '10.0.0.2' }],
  },
  {
    name: 'a key from a header',
    reference: {
      max: 2,
      timeWindow: windowMs,
      keyGenerator: (req: { headers: Record<string, unknown> }) => String(req.headers['x-api-key']),
    },
    sluice: (clock) => ({ limiter: window(2, clock), key: { header: 'x-api-key' }, clock }),
    requests: [
      ...times(3, { url: '/hello', apiKey: 'a' }),
      ...times(3, { url: '/hello', apiKey: 'b' }),
    ],
  },
  {
    name: 'a route with its own limit (its own counters), and a route turned off',
    reference: { max: 3, timeWindow: windowMs },
    sluice: (clock) => ({ limiter: window(3, clock), clock }),
    strict: {
      reference: { max: 1, timeWindow: windowMs },
      sluice: (clock) => ({ limiter: window(1, clock) }),
    },
    requests: [
      ...times(2, { url: '/strict' }),
      ...times(4, { url: '/hello' }),
      ...times(5, { url: '/free' }),
    ],
  },
  {
    name: 'global: false: only the routes with a rateLimit config of their own are limited',
    reference: { global: false, max: 3, timeWindow: windowMs },
    sluice: (clock) => ({ global: false, limiter: window(3, clock), clock }),
    strict: {
      reference: { max: 2, timeWindow: windowMs },
      sluice: (clock) => ({ limiter: window(2, clock) }),
    },
    requests: [...times(5, { url: '/hello' }), ...times(4, { url: '/strict' })],
  },
  {
    name: "a window as text: timeWindow: '1 minute', window: '1 minute'",
    reference: { max: 2, timeWindow: '1 minute' },
    sluice: (clock) => ({
      limiter: () => new FixedWindow({ limit: 2, window: '1 minute', clock }),
      clock,
    }),
    requests: times(4, { url: '/hello' }),
  },
  {
    name: 'an allow list',
    reference: { max: 1, timeWindow: windowMs, allowList: ['10.9.9.9'] },
    sluice: (clock) => ({ limiter: window(1, clock), allowList: ['10.9.9.9'], clock }),
    requests: [...times(3, { url: '/hello', ip: '10.9.9.9' }), ...times(2, { url: '/hello' })],
  },
]

async function build(
  register: (app: FastifyInstance) => PromiseLike<unknown>,
  strict: object | undefined,
): Promise<FastifyInstance> {
  const app = Fastify()
  apps.push(app)
  await register(app)
  app.get('/hello', async () => 'hello')
  app.get('/strict', { config: { rateLimit: strict ?? {} } }, async () => 'strict')
  app.get('/free', { config: { rateLimit: false } }, async () => 'free')
  await app.ready()
  return app
}

function send(app: FastifyInstance, r: Request): Promise<LightMyRequestResponse> {
  return app.inject({
    url: r.url,
    remoteAddress: r.ip ?? '127.0.0.1',
    headers: r.apiKey === undefined ? {} : { 'x-api-key': r.apiKey },
  })
}

/** The same request to the reference, then to Sluice: their responses in that order. */
async function both(
  reference: FastifyInstance,
  sluice: FastifyInstance,
  r: Request,
): Promise<[LightMyRequestResponse, LightMyRequestResponse]> {
  return [await send(reference, r), await send(sluice, r)]
}

const num = (v: unknown): number | undefined => (v === undefined ? undefined : Number(v))

describe('parity with @fastify/rate-limit', () => {
  it.each(scenarios)('$name', async (s) => {
    const clock = new ManualClock()
    const reference = await build(
      (app) => app.register(fastifyRateLimitReference, s.reference),
      s.strict?.reference,
    )
    const sluice = await build(
      (app) => app.register(fastifyRateLimit, { ...s.sluice(clock), headers: 'legacy' }),
      s.strict?.sluice(clock),
    )
    for (const [i, r] of s.requests.entries()) {
      const [a, b] = await both(reference, sluice, r)
      const at = `request ${i} (${r.url})`
      expect(b.statusCode, at).toBe(a.statusCode)
      // The limit and what remains: the same numbers, present on the same responses.
      expect(num(b.headers['x-ratelimit-limit']), at).toBe(num(a.headers['x-ratelimit-limit']))
      expect(num(b.headers['x-ratelimit-remaining']), at).toBe(
        num(a.headers['x-ratelimit-remaining']),
      )
      // Seconds until the window resets, and Retry-After on a refusal: the same within a second.
      for (const h of ['x-ratelimit-reset', 'retry-after']) {
        expect(b.headers[h] === undefined, `${at}: ${h}`).toBe(a.headers[h] === undefined)
        if (a.headers[h] !== undefined)
          expect(
            Math.abs(num(b.headers[h])! - num(a.headers[h])!),
            `${at}: ${h}`,
          ).toBeLessThanOrEqual(1)
      }
    }
  })
})

describe('parity of the IETF fields with the draft fields of @fastify/rate-limit', () => {
  it('says the same quota, remaining and reset, in the structured form of the current draft', async () => {
    const clock = new ManualClock()
    const reference = await build(
      (app) =>
        app.register(fastifyRateLimitReference, {
          max: 3,
          timeWindow: windowMs,
          enableDraftSpec: true,
        }),
      undefined,
    )
    const sluice = await build(
      (app) =>
        app.register(fastifyRateLimit, {
          limiter: window(3, clock),
          policy: { name: 'per-ip', quota: 3, windowSec: 60 },
          headers: 'ietf', // the policy on every response, as the reference sends its limit
          clock,
        }),
      undefined,
    )
    for (let i = 0; i < 5; i++) {
      const [a, b] = await both(reference, sluice, { url: '/hello' })
      expect(b.statusCode).toBe(a.statusCode)
      const policy = /^"per-ip";q=(\d+);w=(\d+)$/.exec(String(b.headers['ratelimit-policy']))
      const state = /^"per-ip";r=(\d+);t=(\d+)$/.exec(String(b.headers.ratelimit))
      expect(policy, `request ${i}`).not.toBeNull()
      expect(state, `request ${i}`).not.toBeNull()
      expect(Number(policy![1])).toBe(num(a.headers['ratelimit-limit']))
      expect(Number(policy![2])).toBe(windowMs / 1000)
      expect(Number(state![1])).toBe(num(a.headers['ratelimit-remaining']))
      expect(Math.abs(Number(state![2]) - num(a.headers['ratelimit-reset'])!)).toBeLessThanOrEqual(
        1,
      )
    }
  })
})

describe("parity of a refusal's body with @fastify/rate-limit's errorResponseBuilder", () => {
  it('errorResponse sends the same body and status the peer’s errorResponseBuilder does', async () => {
    const clock = new ManualClock()
    const body = { statusCode: 429, error: 'Too Many Requests', message: 'slow down' }
    const reference = await build(
      (app) =>
        app.register(fastifyRateLimitReference, {
          max: 1,
          timeWindow: windowMs,
          errorResponseBuilder: () => body,
        }),
      undefined,
    )
    const sluice = await build(
      (app) =>
        app.register(fastifyRateLimit, {
          limiter: window(1, clock),
          errorResponse: () => body,
          clock,
        }),
      undefined,
    )
    for (let i = 0; i < 3; i++) {
      const [a, b] = await both(reference, sluice, { url: '/hello' })
      expect(b.statusCode, `request ${i}`).toBe(a.statusCode)
      if (a.statusCode === 429) expect(b.json(), `request ${i}`).toEqual(a.json())
    }
  })
})
