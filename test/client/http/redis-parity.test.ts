import { spawn, type ChildProcess } from 'node:child_process'
import { mkdtempSync, rmSync } from 'node:fs'
import type { Server } from 'node:http'
import type { AddressInfo } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import fastifyLimit from '@fastify/rate-limit'
import express from 'express'
import { rateLimit } from 'express-rate-limit'
import Fastify, { type FastifyInstance } from 'fastify'
import { Redis } from 'ioredis'
import { RedisStore, type RedisReply } from 'rate-limit-redis'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { createRateLimitMiddleware, fastifyRateLimit } from '../../../client/http/index.js'
import { Cluster } from '../../helpers/cluster.js'
import { dictionary } from '../../helpers/fields.js'

// What a user replacing express-rate-limit or @fastify/rate-limit on a Redis store sees: three
// gateways each, "100 a minute per API key", the same requests in the same order, round robin
// over the gateways. The peers run on a real redis-server (a unix socket in a temporary
// directory); Sluice's gateways are real Express and fastify servers whose clients talk to a
// real coordinator over WebSockets on a manual clock (stepped 20 ms between requests). Every
// request goes over HTTP on 127.0.0.1. The status of each request and the header fields are
// compared; every difference is either asserted equal or stated (docs/http.md, "With a Redis
// store: what differs").

const limit = 100
const windowMs = 60_000
const gateways = 3

/** The requests: 130 under alpha, 20 under beta (every fifth while they last), in order. */
const plan: { key: string; gateway: number }[] = []
{
  let beta = 0
  for (let i = 0; i < 150; i++) {
    const key = i % 5 === 4 && beta < 20 ? 'beta' : 'alpha'
    if (key === 'beta') beta++
    plan.push({ key, gateway: i % gateways })
  }
}

interface Answer {
  readonly key: string
  readonly status: number
  readonly headers: Headers
}

let redis: ChildProcess | undefined
let socketDir = ''
const closers: (() => Promise<unknown>)[] = []

beforeAll(async () => {
  socketDir = mkdtempSync(join(tmpdir(), 'sluice-redis-'))
  const socket = join(socketDir, 'redis.sock')
  redis = spawn(
    'redis-server',
    ['--port', '0', '--unixsocket', socket, '--save', '', '--appendonly', 'no'],
    { stdio: ['ignore', 'pipe', 'pipe'] },
  )
  const started = redis
  await new Promise<void>((resolve, reject) => {
    let out = ''
    started.once('error', (e) =>
      reject(new Error(`cannot start redis-server (apt-get install redis-server): ${e.message}`)),
    )
    started.stdout!.on('data', (d: Buffer) => {
      out += d.toString()
      if (/ready to accept connections/i.test(out)) resolve()
    })
    started.once('exit', (code) => reject(new Error(`redis-server exited (${code}): ${out}`)))
  })
})

afterAll(async () => {
  for (const close of closers.splice(0).reverse()) await close()
  redis?.kill('SIGKILL')
  rmSync(socketDir, { recursive: true, force: true })
})

/** A connection of its own per gateway, as separate processes would have. */
function redisClient(): Redis {
  const client = new Redis({ path: join(socketDir, 'redis.sock'), maxRetriesPerRequest: 1 })
  closers.push(() => client.quit())
  return client
}

async function listen(app: express.Express): Promise<string> {
  const server: Server = app.listen(0, '127.0.0.1')
  await new Promise((r) => server.once('listening', r))
  closers.push(() => new Promise((r) => server.close(r)))
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}/hello`
}

async function listenFastify(app: FastifyInstance): Promise<string> {
  app.get('/hello', async () => ({ hello: 'world' }))
  await app.listen({ port: 0, host: '127.0.0.1' })
  closers.push(() => app.close())
  return `http://127.0.0.1:${(app.server.address() as AddressInfo).port}/hello`
}

/** The plan through `urls` (one per gateway); `between` runs after each request. */
async function replay(urls: readonly string[], between?: () => Promise<void>): Promise<Answer[]> {
  const out: Answer[] = []
  for (const { key, gateway } of plan) {
    const res = await fetch(urls[gateway]!, { headers: { 'x-api-key': key } })
    await res.arrayBuffer()
    out.push({ key, status: res.status, headers: res.headers })
    await between?.()
  }
  return out
}

/** A keyed quota of 100 per API key per minute, as docs/http.md writes express-rate-limit's. */
async function sluiceCluster(): Promise<Cluster> {
  const cluster = new Cluster()
  closers.push(() => cluster.close())
  await cluster.start({
    server: { limits: { roundDebounceMs: 0 } },
    resources: [
      {
        match: 'apikey/*',
        keyed: true,
        kind: 'quota',
        capacity: limit,
        window: '1m',
        refreshMs: 200,
        leaseTtlMs: 5000,
        graceMs: 200,
        windowGraceMs: 200,
        learningMs: 0,
        unsafeLearning: true,
      },
    ],
  })
  return cluster
}

async function families(cluster: Cluster) {
  const out = await Promise.all(
    Array.from({ length: gateways }, async (_, i) =>
      (await cluster.client(`gw-${i}`)).keyed('apikey'),
    ),
  )
  for (let i = 0; i < 30 && out.some((f) => f.lease === undefined); i++) await cluster.step(100)
  return out
}

const statuses = (answers: readonly Answer[], key: string) =>
  answers.filter((a) => a.key === key).map((a) => a.status)

/**
 * What each side admitted, and where their answers differ: the requests of each key the
 * central counter admitted and Sluice refused, and the reverse.
 */
function compare(central: readonly Answer[], sluice: readonly Answer[]) {
  const differ: { i: number; key: string; central: number; sluice: number }[] = []
  for (let i = 0; i < central.length; i++)
    if (central[i]!.status !== sluice[i]!.status)
      differ.push({
        i,
        key: central[i]!.key,
        central: central[i]!.status,
        sluice: sluice[i]!.status,
      })
  return differ
}

/**
 * The same requests admitted, request by request. Before remote decisions one pair differed at
 * the end of a key's budget (a gateway whose block was spent refused while another still held
 * a unit; at most two pairs allowed then, 11 before a key's holders kept their seeded leases
 * until they reported it); now a check its block cannot decide is asked of the coordinator,
 * which decides it against what the key has left: 0 differences in 12 of 12 runs (2026-12-07,
 * six of them beside another test file).
 */
function expectSameAnswers(central: readonly Answer[], sluice: readonly Answer[]): void {
  expect(compare(central, sluice)).toEqual([])
}

describe('parity with express-rate-limit on a Redis store (rate-limit-redis), 3 gateways each', () => {
  it("admits the same requests of each key, says the same limit, and remaining near the central counter's", async () => {
    const central = await Promise.all(
      Array.from({ length: gateways }, () => {
        const app = express()
        const store = redisClient()
        app.use(
          rateLimit({
            windowMs,
            limit,
            standardHeaders: 'draft-7',
            legacyHeaders: false,
            keyGenerator: (req) => req.get('x-api-key') ?? 'none',
            store: new RedisStore({
              prefix: 'erl:',
              sendCommand: (command: string, ...args: string[]) =>
                store.call(command, ...args) as Promise<RedisReply>,
            }),
          }),
        )
        app.get('/hello', (_req, res) => void res.json({ hello: 'world' }))
        return listen(app)
      }),
    )
    const cluster = await sluiceCluster()
    const sluice = await Promise.all(
      (await families(cluster)).map((family) => {
        const app = express()
        const middleware = createRateLimitMiddleware({
          resource: family,
          key: (req) => (req as express.Request).get('x-api-key') ?? 'none',
          headers: 'draft-7',
          clock: cluster.clock,
        })
        app.use((req, res, next) => void middleware(req, res, next))
        app.get('/hello', (_req, res) => void res.json({ hello: 'world' }))
        return listen(app)
      }),
    )
    const a = await replay(central)
    const b = await replay(sluice, () => cluster.step(20))
    // The central counter: the first 100 of alpha, all 20 of beta.
    expect(statuses(a, 'alpha').filter((s) => s === 200)).toHaveLength(limit)
    expect(statuses(a, 'beta').every((s) => s === 200)).toBe(true)
    // Sluice: never past the limit, and the same requests.
    expect(statuses(b, 'alpha').filter((s) => s === 200)).toHaveLength(limit)
    expect(statuses(b, 'beta').every((s) => s === 200)).toBe(true)
    expectSameAnswers(a, b)
    const gaps: number[] = []
    for (let i = 0; i < plan.length; i++) {
      const at = `request ${i} (${plan[i]!.key} at gateway ${plan[i]!.gateway})`
      const [x, y] = [a[i]!.headers, b[i]!.headers]
      const [dx, dy] = [dictionary(x.get('ratelimit')), dictionary(y.get('ratelimit'))]
      // The limit: the key's, not a gateway's share of it.
      expect(dy.limit, at).toBe(dx.limit)
      expect(y.get('ratelimit-policy'), at).toBe(x.get('ratelimit-policy'))
      // Remaining: both say what the key has left across the gateways; Sluice's as the
      // coordinator last heard it, so the others' spending since their last report is not
      // in it (docs/http.md).
      gaps.push(dy.remaining! - dx.remaining!)
      // A refusal says when to come back, in whole seconds, within the window.
      if (b[i]!.status === 429) {
        expect(Number(y.get('retry-after')), at).toBeGreaterThanOrEqual(1)
        expect(Number(y.get('retry-after')), at).toBeLessThanOrEqual(60)
      }
    }
    // Measured (mean |gap| 6.7, from 22 under to 10 over): on the default shares a gateway's
    // part scaled to the key counts the coordinator's own part as spent like the rest (under);
    // once the key is leased on its own, the others' spending since their last report (a
    // refresh period: 10 requests here) is not in it (over). With `remaining: 'here'` (what
    // this gateway will admit now) the mean was 35.1, up to 75 under.
    const mean = gaps.reduce((sum, g) => sum + Math.abs(g), 0) / gaps.length
    expect(mean, JSON.stringify(gaps)).toBeLessThan(10)
    for (const g of gaps) {
      expect(g, JSON.stringify(gaps)).toBeLessThanOrEqual(15)
      expect(g, JSON.stringify(gaps)).toBeGreaterThanOrEqual(-25)
    }
  })
})

describe('parity with @fastify/rate-limit on a Redis store, 3 gateways each', () => {
  it('admits the same requests of each key, and says the same limit; remaining never says more than the central counter', async () => {
    const central = await Promise.all(
      Array.from({ length: gateways }, async () => {
        const app = Fastify()
        await app.register(fastifyLimit, {
          max: limit,
          timeWindow: windowMs,
          redis: redisClient(),
          nameSpace: 'frl:',
          keyGenerator: (req) => String(req.headers['x-api-key'] ?? 'none'),
        })
        return listenFastify(app)
      }),
    )
    const cluster = await sluiceCluster()
    const sluice = await Promise.all(
      (await families(cluster)).map(async (family) => {
        const app = Fastify()
        await app.register(fastifyRateLimit, {
          resource: family,
          key: (req) => String(req.headers['x-api-key'] ?? 'none'),
          headers: 'legacy',
          // What this gateway will admit now (the default, 'cluster', is the other test's).
          remaining: 'here',
          clock: cluster.clock,
        })
        return listenFastify(app)
      }),
    )
    const a = await replay(central)
    const b = await replay(sluice, () => cluster.step(20))
    expect(statuses(a, 'alpha').filter((s) => s === 200)).toHaveLength(limit)
    expect(statuses(b, 'alpha').filter((s) => s === 200)).toHaveLength(limit)
    expect(statuses(b, 'beta').every((s) => s === 200)).toBe(true)
    expectSameAnswers(a, b)
    for (let i = 0; i < plan.length; i++) {
      const at = `request ${i} (${plan[i]!.key} at gateway ${plan[i]!.gateway})`
      const [x, y] = [a[i]!.headers, b[i]!.headers]
      expect(y.get('x-ratelimit-limit'), at).toBe(x.get('x-ratelimit-limit'))
      expect(Number(y.get('x-ratelimit-remaining')), at).toBeLessThanOrEqual(
        Number(x.get('x-ratelimit-remaining')),
      )
      if (b[i]!.status === 429) {
        expect(Number(y.get('retry-after')), at).toBeGreaterThanOrEqual(1)
        expect(Number(y.get('retry-after')), at).toBeLessThanOrEqual(60)
      }
    }
  })
})
