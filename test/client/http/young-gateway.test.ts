import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import Fastify, { type LightMyRequestResponse } from 'fastify'
import { afterEach, describe, expect, it } from 'vitest'
import { fastifyRateLimit } from '../../../client/http/index.js'
import type { KeyedFamily } from '../../../client/index.js'
import { Cluster } from '../../helpers/cluster.js'

// The issue's own case (#41): "100 per minute" per API key through the HTTP edge, three
// gateways, a new customer's first 105 requests at the gateway that joined 1.5 s ago. One
// central limiter (express-rate-limit on Redis) admits 100 at once, and all 105 asked over
// 5 s (100/60 a second refills the rest). Measured on 2026-11-26: 2 of 105. A real
// coordinator (a first start on its ledger, as `npm start` runs it) and real clients over
// WebSockets, the default lease timings, a manual clock.

const ratePerSec = 100 / 60
const burst = 100

let cluster: Cluster | undefined
let dataDir: string | undefined
const apps: ReturnType<typeof Fastify>[] = []
afterEach(async () => {
  for (const app of apps.splice(0)) await app.close()
  await cluster?.close()
  cluster = undefined
  if (dataDir !== undefined) rmSync(dataDir, { recursive: true, force: true })
  dataDir = undefined
})

async function gateway(
  id: string,
): Promise<{ app: ReturnType<typeof Fastify>; family: KeyedFamily }> {
  const family = (await cluster!.client(id)).keyed('apikey')
  const app = Fastify()
  apps.push(app)
  await app.register(fastifyRateLimit, {
    resource: family,
    key: { header: 'x-api-key' },
    clock: cluster!.clock,
  })
  app.get('/', async () => 'ok')
  return { app, family }
}

/** `p`, stepping the clock 10 ms at a time until it settles (a remote answer may wait for a lease). */
const stepped = <T>(p: Promise<T>): Promise<T> => cluster!.stepUntil(p)

const remainingOf = (header: unknown): number => Number(/r=(\d+)/.exec(String(header))?.[1])

/** A real coordinator on a fresh ledger (as `npm start` first runs it), "100 per minute" per API key. */
async function startCoordinator(): Promise<Cluster> {
  dataDir = mkdtempSync(join(tmpdir(), 'sluice-data-'))
  const started = new Cluster()
  cluster = started
  await started.start({
    server: { dataDir, limits: { roundDebounceMs: 0 } },
    resources: [
      {
        match: 'apikey/*',
        keyed: true,
        kind: 'rate',
        capacity: 100,
        per: '1m',
        learningMs: 0,
        unsafeLearning: true,
      },
    ],
  })
  return started
}

/** Three gateways, the third joined 1.5 s ago; then `n` requests of a new key at it, `gapMs` apart. */
async function newCustomer(
  n: number,
  gapMs: number,
): Promise<{ admitted: number; central: number; bound: number; firstRemaining: number }> {
  cluster = await startCoordinator()
  const old = [await gateway('gw-0'), await gateway('gw-1')]
  // Ten seconds of other customers' traffic at the two old gateways.
  for (let t = 0; t < 100; t++) {
    for (const [i, g] of old.entries())
      await stepped(g.app.inject({ url: '/', headers: { 'x-api-key': `old-${(t + i) % 7}` } }))
    await cluster.step(100)
  }
  // The third gateway joins (a deploy, a scale-up), and serves once ready.
  const young = await gateway('gw-2')
  await stepped(young.family.ready())
  for (let t = 0; t < 15; t++) await cluster.step(100)
  const startMs = cluster.clock.now()
  let admitted = 0
  let firstRemaining: number | undefined
  // One exact central bucket fed the same requests, full at the key's first.
  let tokens = burst
  let central = 0
  let lastMs = startMs
  for (let i = 0; i < n; i++) {
    const atMs = cluster.clock.now()
    tokens = Math.min(burst, tokens + ((atMs - lastMs) / 1000) * ratePerSec)
    lastMs = atMs
    if (tokens >= 1) {
      tokens -= 1
      central++
    }
    const res: LightMyRequestResponse = await stepped(
      young.app.inject({ url: '/', headers: { 'x-api-key': 'new-customer' } }),
    )
    if (res.statusCode === 200) admitted++
    firstRemaining ??= remainingOf(res.headers['ratelimit'])
    await cluster.step(gapMs)
  }
  const elapsedSec = (cluster.clock.now() - startMs) / 1000
  return {
    admitted,
    central,
    bound: burst + Math.floor(ratePerSec * elapsedSec),
    firstRemaining: firstRemaining!,
  }
}

/**
 * Three gateways (`youngAtMs` after the third joined: Infinity, none young), then `n` requests
 * of a new key at once at the third (a client that keeps its connection to one gateway).
 */
async function newCustomerAtOnce(n: number): Promise<{
  admitted: number
  bound: number
  answeredInMs: number
  retryAfter: string[]
}> {
  cluster = await startCoordinator()
  const gws = [await gateway('gw-0'), await gateway('gw-1'), await gateway('gw-2')]
  // Ten seconds of other customers' traffic at every gateway.
  for (let t = 0; t < 100; t++) {
    for (const [i, g] of gws.entries())
      await stepped(g.app.inject({ url: '/', headers: { 'x-api-key': `old-${(t + i) % 7}` } }))
    await cluster.step(100)
  }
  const startMs = cluster.clock.now()
  const asked: Promise<LightMyRequestResponse>[] = []
  for (let i = 0; i < n; i++)
    asked.push(gws[2]!.app.inject({ url: '/', headers: { 'x-api-key': 'new-customer' } }))
  const answers = await stepped(Promise.all(asked))
  const elapsedSec = (cluster.clock.now() - startMs) / 1000
  return {
    admitted: answers.filter((r) => r.statusCode === 200).length,
    bound: burst + Math.floor(ratePerSec * elapsedSec),
    answeredInMs: cluster.clock.now() - startMs,
    retryAfter: answers
      .filter((r) => r.statusCode !== 200)
      .map((r) => String(r.headers['retry-after'])),
  }
}

describe('a new customer asking at once at one gateway of three ("100 per minute", the HTTP edge)', () => {
  it('gets its burst at once, as one central limiter gives it, though the other gateways held two thirds of it', async () => {
    // One central limiter admits 100 of 105 at once. The gateway holds its third of the key's
    // burst; the rest of the checks wait for the key to move: its early report makes it hot, the
    // other two gateways say at once that they do not ask for it (client/keyed/family.ts), fall
    // to 0 giving up their thirds, and the key's rise here holds them (server/pool/shapes/
    // hot-key.ts, lease-out.ts `rising`). Measured 100 of 105; 33 before (the rest refused with
    // `Retry-After: 2`, the key moving 0.6 s later, its thirds 2.7 s later).
    const r = await newCustomerAtOnce(105)
    const seen = JSON.stringify(r)
    expect(r.admitted, seen).toBeLessThanOrEqual(r.bound)
    // Measured 100 (answered 20 ms on) in every run, also with four busy loops beside it.
    expect(r.admitted, seen).toBeGreaterThanOrEqual(100)
    // The rest: refused with when the next token comes (0.6 s: 100 per minute), not a window.
    for (const ra of r.retryAfter) expect(Number(ra), seen).toBeLessThanOrEqual(1)
  })
})

describe('a new customer at a gateway that just joined ("100 per minute", the HTTP edge)', () => {
  it('gets what one central limiter gives within about two seconds: its burst, though the other gateways held two thirds of it', async () => {
    // 105 requests, one every 50 ms: the central bucket admits all (100, then the refill).
    const r = await newCustomer(105, 50)
    const seen = JSON.stringify(r)
    expect(r.central, seen).toBe(105)
    expect(r.admitted, seen).toBeLessThanOrEqual(r.bound)
    // Its own third of the burst at once; the key, hot here alone, moves here, and the two
    // thirds the other gateways held of it, never spent there, come with it (their falls to 0
    // give them up: pool/shapes/hot-key.ts). Measured 101-105 in 15 runs (41 before, when they
    // kept them). A CI run once measured 89 here: the clock moved on while a lease was being
    // written to the ledger (real time); Cluster.step now waits for the ledger's writes, and the
    // run gives 103 every time, also with four busy loops beside it (2026-12-07).
    expect(r.admitted, seen).toBeGreaterThanOrEqual(100)
    // The first answer says what the key has left across the gateways (a central counter: 99).
    expect(r.firstRemaining, seen).toBeGreaterThanOrEqual(90)
  })
})
