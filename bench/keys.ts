import { mkdtemp, rm, writeFile } from 'node:fs/promises'
import { createRequire } from 'node:module'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { RateLimiterRedis } from 'rate-limiter-flexible'
import { createClient, type KeyedFamily, type SluiceClient } from '../client/index.js'
import { CoordinatorProcess, freePort, sleep } from './faults/harness.js'
import { excessOverBound, type Admission } from './faults/measure.js'
import { medianRange, summarise } from './stats.js'
import { seededRandom, zipf } from '../shared/index.js'
import { startRedis } from './redis.js'

/**
 * `npm run bench -- keys`: per-key limits on one Zipf(1.1) workload over
 * 10,000 keys, 20/s per key, side by side in one run:
 *
 * - Sluice: a keyed family (`client.keyed`), decisions in-process, a
 *   coordinator (`sluice serve`) in a process of its own;
 * - @fastify/rate-limit's Redis store (the store the plugin uses given
 *   `redis`: its Lua INCR/PEXPIRE script, a round trip per request), called
 *   as the plugin's onRequest hook calls it, and rate-limiter-flexible's
 *   `RateLimiterRedis`, against a real redis-server;
 * - a static split: each of N processes enforces capacity/N per key locally.
 *
 * Decisions/s and p99 per process (one caller, awaited where the limiter is
 * async), keys admitted past capacity·t + burst (burst = capacity) over the
 * run, and what a hot key gets when one of 3 processes asks for it.
 */

/** @fastify/rate-limit's Redis store (no types of its own for the deep path). */
interface FastifyRedisStore {
  incr(
    key: string,
    cb: (err: Error | null, result: { current: number; ttl: number } | null) => void,
    timeWindowMs: number,
    max: number,
  ): void
}
const FastifyRateLimitRedisStore = createRequire(import.meta.url)(
  '@fastify/rate-limit/store/RedisStore.js',
) as new (
  continueExceeding: boolean,
  exponentialBackoff: boolean,
  redis: unknown,
  keyPrefix?: string,
) => FastifyRedisStore
const capacity = 20
const keys = 10_000

function percentile(sorted: Float64Array, p: number): number {
  return sorted[Math.min(sorted.length - 1, Math.floor(p * sorted.length))]!
}

/**
 * Decisions/s and p99 µs of `decide` over `n` Zipf-drawn keys (`decide` may return a promise),
 * and how many keys it admitted past capacity·t + burst over the run.
 */
async function measure(
  decide: (key: string) => boolean | Promise<boolean>,
  n: number,
  async: boolean,
  prefix: string,
): Promise<{ perSec: number; p99Us: number; admitted: number; keysOver: number }> {
  const draw = zipf(keys, 1.1, seededRandom(7))
  // Each run's keys are new to the limiter (a prefix per run): runs do not carry state over.
  const names = Array.from({ length: keys }, (_, i) => `${prefix}k${i}`)
  const drawn = Int32Array.from({ length: n }, () => draw())
  const times = new Float64Array(n)
  const admittedAtMs = new Float64Array(n).fill(Number.NaN)
  let admitted = 0
  const start = process.hrtime.bigint()
  for (let i = 0; i < n; i++) {
    const t = process.hrtime.bigint()
    const key = names[drawn[i]!]!
    const ok = async ? await decide(key) : (decide(key) as boolean)
    const end = process.hrtime.bigint()
    times[i] = Number(end - t) / 1000
    if (ok) {
      admitted++
      admittedAtMs[i] = Number(end - start) / 1e6
    }
  }
  const totalSec = Number(process.hrtime.bigint() - start) / 1e9
  times.sort()
  return {
    perSec: n / totalSec,
    p99Us: percentile(times, 0.99),
    admitted,
    keysOver: keysOverBound(drawn, admittedAtMs),
  }
}

/** Keys whose admissions (at `admittedAtMs[i]` of key `drawn[i]`; NaN: refused) passed capacity·t + burst. */
function keysOverBound(drawn: Int32Array, admittedAtMs: Float64Array): number {
  const byKey = new Map<number, Admission[]>()
  for (let i = 0; i < drawn.length; i++) {
    if (Number.isNaN(admittedAtMs[i])) continue
    let list = byKey.get(drawn[i]!)
    if (list === undefined) byKey.set(drawn[i]!, (list = []))
    list.push({ t: admittedAtMs[i]!, n: 1 })
  }
  let over = 0
  for (const list of byKey.values())
    if (excessOverBound(list, [{ fromMs: -1, capacity }], capacity) > 0) over++
  return over
}

/** A coordinator with the family key/* of `capacity`/s per key. */
async function startCoordinator(dir: string): Promise<CoordinatorProcess> {
  const config = join(dir, 'sluice.json')
  await writeFile(
    config,
    JSON.stringify({
      server: { host: '127.0.0.1', limits: { roundDebounceMs: 20 } },
      resources: [{ match: 'key/*', keyed: true, kind: 'rate', capacity, refreshMs: 250 }],
    }),
  )
  const c = new CoordinatorProcess(config, await freePort())
  await c.start()
  return c
}

async function family(port: number, id: string): Promise<{ client: SluiceClient; f: KeyedFamily }> {
  const client = createClient({ url: `ws://127.0.0.1:${port}/v1/connect`, clientId: id })
  client.on('error', () => undefined)
  const f = client.keyed('key')
  await f.ready({ timeoutMs: 10_000 })
  return { client, f }
}

export async function benchKeys(runs: number): Promise<string[]> {
  const dir = await mkdtemp(join(tmpdir(), 'sluice-keys-'))
  const coordinator = await startCoordinator(dir)
  const rows: string[] = []
  const fmt = medianRange
  try {
    // Sluice: one process's decisions, in-process.
    const a = await family(coordinator.port, 'bench-a')
    await sleep(1500) // the share in force, and earned
    const sluice = { perSec: [] as number[], p99: [] as number[], over: [] as number[] }
    for (let r = 0; r < runs; r++) {
      const m = await measure((k) => a.f.tryAcquire(k), 1_000_000, false, `s${r}-`)
      sluice.perSec.push(m.perSec)
      sluice.p99.push(m.p99Us)
      sluice.over.push(m.keysOver)
    }
    rows.push(
      `| Sluice \`client.keyed('key').tryAcquire(key)\` (in-process) | ${fmt(sluice.perSec)} | ${fmt(sluice.p99, ' µs')} | ${Math.max(...sluice.over)} | 1.00× |`,
    )

    // The Redis-backed limiters: a round trip per decision, against the same redis-server.
    const store = await startRedis(dir)
    if (store === undefined)
      rows.push('| the Redis-backed limiters | not run (no redis-server) | — | — | — |')
    else {
      try {
        const redis = store.redis
        const sluiceMedian = summarise(sluice.perSec).median
        const fastifyStore = new FastifyRateLimitRedisStore(false, false, redis, 'bench-frl-')
        const rateLimiterRedis = new RateLimiterRedis({
          storeClient: redis,
          points: capacity,
          duration: 1,
          keyPrefix: 'bench-rlf',
        })
        const peers: { name: string; decide: (key: string) => Promise<boolean> }[] = [
          {
            name: "@fastify/rate-limit's Redis store (`incr`, as its onRequest hook calls it; `max: 20`, `timeWindow: 1000`)",
            decide: (key) =>
              new Promise<boolean>((resolve) =>
                fastifyStore.incr(
                  key,
                  (err, result) =>
                    resolve(err === null && result !== null && result.current <= capacity),
                  1000,
                  capacity,
                ),
              ),
          },
          {
            name: 'rate-limiter-flexible `RateLimiterRedis.consume(key)`',
            decide: (key) =>
              rateLimiterRedis.consume(key).then(
                () => true,
                () => false,
              ),
          },
        ]
        for (const peer of peers) {
          const r = { perSec: [] as number[], p99: [] as number[], over: [] as number[] }
          for (let i = 0; i < runs; i++) {
            const m = await measure(peer.decide, 20_000, true, `r${i}-`)
            r.perSec.push(m.perSec)
            r.p99.push(m.p99Us)
            r.over.push(m.keysOver)
          }
          rows.push(
            `| ${peer.name} (redis-server on a unix socket, awaited) | ${fmt(r.perSec)} | ${fmt(r.p99, ' µs')} | ${Math.max(...r.over)} | ${(sluiceMedian / summarise(r.perSec).median).toFixed(0)}× fewer |`,
          )
        }
      } finally {
        store.stop()
      }
    }

    // A hot key asked for at one process of three: what it gets, against a static split.
    const b = await family(coordinator.port, 'bench-b')
    const c = await family(coordinator.port, 'bench-c')
    await sleep(1500)
    let got = 0
    const seconds = 6
    const askPerSec = 200
    for (let t = 0; t < seconds * 20; t++) {
      for (let i = 0; i < askPerSec / 20; i++) if (a.f.tryAcquire('hot')) got++
      await sleep(50)
    }
    const sluiceHot = got / seconds
    rows.push(
      '',
      `| a key asked for at ${askPerSec}/s by one of 3 processes (${capacity}/s per key, ${seconds} s, from its first request) | admitted/s | of the key's capacity |`,
      '| --- | --- | --- |',
      `| Sluice keyed family (max-min over the processes' demand) | ${sluiceHot.toFixed(1)} | ${((100 * sluiceHot) / capacity).toFixed(0)}% |`,
      `| static split (capacity / 3 in each process) | ${(capacity / 3).toFixed(1)} | 33% |`,
    )
    for (const x of [a, b, c]) await x.client.close()
  } finally {
    await coordinator.stop()
    await rm(dir, { recursive: true, force: true })
  }
  return rows
}
