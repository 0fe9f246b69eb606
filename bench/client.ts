import { spawn, spawnSync } from 'node:child_process'
import { existsSync } from 'node:fs'
import { mkdtemp } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { Redis } from 'ioredis'
import { RateLimiterMemory, RateLimiterRedis } from 'rate-limiter-flexible'
import { resolveResourceOptions } from '../client/options.js'
import { Resource, type ResourceOwner } from '../client/resource.js'
import { CoarseClock, systemClock } from '../shared/index.js'
import { summarise } from './stats.js'

/**
 * Checks per second on the allow path: Sluice's `tryAcquire` on a leased
 * resource, a bare minimal token bucket (the floor), and
 * rate-limiter-flexible's RateLimiterMemory and RateLimiterRedis (a real
 * redis-server on a unix socket, started here). Every limiter is set so
 * that every check is allowed: the allow path is what a healthy service
 * runs.
 */

const owner: ResourceOwner = {
  requestEarlyReport: () => undefined,
  drained: () => undefined,
  releaseResource: () => undefined,
}

class BareBucket {
  tokens: number
  last: number
  constructor(
    readonly ratePerMs: number,
    readonly burst: number,
  ) {
    this.tokens = burst
    this.last = performance.now()
  }
  tryTake(): boolean {
    const now = performance.now()
    const t = this.tokens + (now - this.last) * this.ratePerMs
    this.tokens = t < this.burst ? t : this.burst
    this.last = now
    if (this.tokens < 1) return false
    this.tokens -= 1
    return true
  }
}

function opsPerSec(run: (n: number) => number, n: number): number {
  const start = performance.now()
  const allowed = run(n)
  const elapsed = performance.now() - start
  if (allowed !== n) throw new Error(`expected every check allowed, got ${allowed}/${n}`)
  return (n / elapsed) * 1000
}

/**
 * The same, in chunks of `chunk` checks with a turn of the event loop between
 * them (as a server's checks come between I/O), so the coarse clock's timer
 * ticks and the bucket refills as it would in a real process.
 */
async function opsPerSecChunked(take: () => boolean, n: number, chunk: number): Promise<number> {
  const start = performance.now()
  let allowed = 0
  for (let done = 0; done < n; done += chunk) {
    for (let i = 0; i < chunk; i++) if (take()) allowed++
    await new Promise((resolve) => setImmediate(resolve))
  }
  const elapsed = performance.now() - start
  if (allowed !== n) throw new Error(`expected every check allowed, got ${allowed}/${n}`)
  return (n / elapsed) * 1000
}

async function opsPerSecAsync(
  run: () => Promise<unknown>,
  n: number,
  concurrency: number,
): Promise<number> {
  const start = performance.now()
  let next = 0
  const worker = async (): Promise<void> => {
    while (next < n) {
      next++
      await run()
    }
  }
  await Promise.all(Array.from({ length: concurrency }, worker))
  return (n / (performance.now() - start)) * 1000
}

export async function benchClient(runs: number): Promise<string[]> {
  const huge = 1e12
  const lease = {
    resource: 'bench',
    kind: 'rate' as const,
    capacity: huge,
    burst: huge,
    ttlMs: 3_600_000,
    refreshMs: 1000,
    safeCapacity: 0,
    safeHoldMs: 0,
  }
  // What a client does by default: tryAcquire reads the client's coarse clock.
  const coarse = new CoarseClock(systemClock)
  const resource = new Resource(
    'bench',
    resolveResourceOptions('bench', {}),
    systemClock,
    owner,
    coarse,
  )
  resource.applyLease(lease)
  // hotPathClock: 'precise': a clock read per check.
  const precise = new Resource('bench', resolveResourceOptions('bench', {}), systemClock, owner)
  precise.applyLease(lease)
  const bare = new BareBucket(huge / 1000, huge)
  const memory = new RateLimiterMemory({ points: 1e9, duration: 60 })

  const rows: Record<string, number[]> = {
    sluice: [],
    precise: [],
    bare: [],
    sluiceChunked: [],
    bareChunked: [],
    memory: [],
    redis: [],
  }
  const n = 20_000_000
  for (let r = 0; r < runs; r++) {
    // Let the coarse clock tick: the buckets fill from empty after a lease.
    await new Promise((resolve) => setTimeout(resolve, 5))
    rows.sluice!.push(
      opsPerSec((k) => {
        let ok = 0
        for (let i = 0; i < k; i++) if (resource.tryAcquire()) ok++
        return ok
      }, n),
    )
    rows.precise!.push(
      opsPerSec((k) => {
        let ok = 0
        for (let i = 0; i < k; i++) if (precise.tryAcquire()) ok++
        return ok
      }, n),
    )
    rows.bare!.push(
      opsPerSec((k) => {
        let ok = 0
        for (let i = 0; i < k; i++) if (bare.tryTake()) ok++
        return ok
      }, n),
    )
    rows.sluiceChunked!.push(await opsPerSecChunked(() => resource.tryAcquire(), n, 10_000))
    rows.bareChunked!.push(await opsPerSecChunked(() => bare.tryTake(), n, 10_000))
    rows.memory!.push(await opsPerSecAsync(() => memory.consume('key'), 300_000, 1))
  }

  const redisPath = spawnSync('which', ['redis-server']).stdout.toString().trim()
  if (redisPath === '') {
    rows.redis = []
  } else {
    const dir = await mkdtemp(join(tmpdir(), 'sluice-redis-'))
    const socket = join(dir, 'redis.sock')
    const server = spawn(
      redisPath,
      ['--port', '0', '--unixsocket', socket, '--save', '', '--appendonly', 'no', '--dir', dir],
      {
        stdio: 'ignore',
      },
    )
    try {
      // Wait (bounded) for redis-server to create its socket, then connect once.
      for (let i = 0; i < 250 && !existsSync(socket); i++)
        await new Promise((resolve) => setTimeout(resolve, 20))
      const redis = new Redis({ path: socket, maxRetriesPerRequest: 1 })
      await redis.ping()
      const limiter = new RateLimiterRedis({
        storeClient: redis,
        points: 1e9,
        duration: 60,
        keyPrefix: 'bench',
      })
      for (let r = 0; r < runs; r++)
        rows.redis!.push(await opsPerSecAsync(() => limiter.consume('key'), 20_000, 1))
      redis.disconnect()
    } finally {
      server.kill('SIGTERM')
    }
  }

  coarse.close()
  const fmt = (values: number[]): string => {
    if (values.length === 0) return 'not run (no redis-server: `apt-get install redis-server`)'
    const s = summarise(values)
    const f = (x: number): string =>
      x >= 1e6 ? `${(x / 1e6).toFixed(1)}M` : x >= 1e3 ? `${(x / 1e3).toFixed(1)}k` : x.toFixed(0)
    return `${f(s.median)} (${f(s.min)}–${f(s.max)})`
  }
  const median = (k: string): number => (rows[k]!.length > 0 ? summarise(rows[k]!).median : NaN)
  const ratio = (k: string): string =>
    Number.isFinite(median(k)) ? `${(median('sluice') / median(k)).toFixed(2)}×` : '—'
  return [
    `| Sluice \`tryAcquire\` (leased rate resource, coarse clock: the default) | ${fmt(rows.sluice!)} | 1.00× |`,
    `| Sluice \`tryAcquire\`, \`hotPathClock: 'precise'\` (a clock read per check) | ${fmt(rows.precise!)} | ${ratio('precise')} |`,
    `| bare minimal token bucket (\`performance.now()\` per check) | ${fmt(rows.bare!)} | ${ratio('bare')} |`,
    `| Sluice \`tryAcquire\`, coarse clock, 10k checks per event-loop turn (the clock ticks, the bucket refills) | ${fmt(rows.sluiceChunked!)} | ${ratio('sluiceChunked')} |`,
    `| bare minimal token bucket, 10k checks per event-loop turn | ${fmt(rows.bareChunked!)} | ${ratio('bareChunked')} |`,
    `| rate-limiter-flexible \`RateLimiterMemory.consume\` (awaited, one caller) | ${fmt(rows.memory!)} | ${ratio('memory')} |`,
    `| rate-limiter-flexible \`RateLimiterRedis.consume\` (redis-server 7 on a unix socket, awaited, one caller) | ${fmt(rows.redis!)} | ${ratio('redis')} |`,
  ]
}
