import { mkdtemp, rm, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { RateLimiterRedis } from 'rate-limiter-flexible'
import { createClient, type KeyedFamily, type SluiceClient } from '../client/index.js'
import { CoordinatorProcess, freePort, sleep } from './faults/harness.js'
import { medianRange, summarise } from './stats.js'
import { seededRandom, zipf } from '../shared/index.js'
import { startRedis } from './redis.js'

/**
 * `npm run bench -- keys`: per-key limits on one Zipf(1.1) workload over
 * 10,000 keys, 20/s per key, side by side in one run:
 *
 * - Sluice: a keyed family (`client.keyed`), decisions in-process, a
 *   coordinator (`sluice serve`) in a process of its own;
 * - rate-limiter-flexible's `RateLimiterRedis` against a real redis-server
 *   (a round trip per decision, the way @fastify/rate-limit's Redis store
 *   and express-rate-limit's stores work too);
 * - a static split: each of N processes enforces capacity/N per key locally.
 *
 * Decisions/s and p99 per process (one caller, awaited where the limiter is
 * async), and what a hot key gets when one of 3 processes asks for it.
 */
const capacity = 20
const keys = 10_000

function percentile(sorted: Float64Array, p: number): number {
  return sorted[Math.min(sorted.length - 1, Math.floor(p * sorted.length))]!
}

/** Decisions/s and p99 µs of `decide` over `n` Zipf-drawn keys (`decide` may return a promise). */
async function measure(
  decide: (key: string) => boolean | Promise<boolean>,
  n: number,
  async: boolean,
): Promise<{ perSec: number; p99Us: number; admitted: number }> {
  const draw = zipf(keys, 1.1, seededRandom(7))
  const names = Array.from({ length: keys }, (_, i) => `k${i}`)
  const order = Array.from({ length: n }, () => names[draw()]!)
  const times = new Float64Array(n)
  let admitted = 0
  const start = process.hrtime.bigint()
  for (let i = 0; i < n; i++) {
    const t = process.hrtime.bigint()
    const ok = async ? await decide(order[i]!) : (decide(order[i]!) as boolean)
    times[i] = Number(process.hrtime.bigint() - t) / 1000
    if (ok) admitted++
  }
  const totalSec = Number(process.hrtime.bigint() - start) / 1e9
  times.sort()
  return { perSec: n / totalSec, p99Us: percentile(times, 0.99), admitted }
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
    const sluice = { perSec: [] as number[], p99: [] as number[] }
    for (let r = 0; r < runs; r++) {
      const m = await measure((k) => a.f.tryAcquire(k), 1_000_000, false)
      sluice.perSec.push(m.perSec)
      sluice.p99.push(m.p99Us)
    }
    rows.push(
      `| Sluice \`client.keyed('key').tryAcquire(key)\` (in-process) | ${fmt(sluice.perSec)} | ${fmt(sluice.p99, ' µs')} | 1.00× |`,
    )

    // rate-limiter-flexible RateLimiterRedis: a round trip per decision.
    const store = await startRedis(dir)
    let redisMedian = NaN
    if (store === undefined) rows.push('| RateLimiterRedis | not run (no redis-server) | — | — |')
    else {
      try {
        const redis = store.redis
        const limiter = new RateLimiterRedis({
          storeClient: redis,
          points: capacity,
          duration: 1,
          keyPrefix: 'bench',
        })
        const r = { perSec: [] as number[], p99: [] as number[] }
        for (let i = 0; i < runs; i++) {
          const m = await measure(
            (k) =>
              limiter.consume(k).then(
                () => true,
                () => false,
              ),
            20_000,
            true,
          )
          r.perSec.push(m.perSec)
          r.p99.push(m.p99Us)
        }
        redisMedian = summarise(r.perSec).median
        rows.push(
          `| rate-limiter-flexible \`RateLimiterRedis.consume(key)\` (redis-server on a unix socket, awaited) | ${fmt(r.perSec)} | ${fmt(r.p99, ' µs')} | ${(summarise(sluice.perSec).median / redisMedian).toFixed(0)}× fewer |`,
        )
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
