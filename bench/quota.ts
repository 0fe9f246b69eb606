import { mkdtemp, rm, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { RateLimiterRedis } from 'rate-limiter-flexible'
import { createClient, type Resource } from '../client/index.js'
import { CoordinatorProcess, freePort, sleep } from './faults/harness.js'
import { medianRange, summarise } from './stats.js'
import { startRedis } from './redis.js'

/**
 * `npm run bench -- quota`: one daily quota, side by side in one run:
 *
 * - Sluice: `kind: quota`, a block of the day's budget spent in-process, a
 *   coordinator (`sluice serve`) in a process of its own;
 * - rate-limiter-flexible's `RateLimiterRedis` with an 86,400 s duration
 *   against a real redis-server: one INCR round trip per decision.
 *
 * Decisions/s and p99 per process (one caller, awaited where the limiter is
 * async), and the share admitted: the budget is large enough that neither
 * runs out, so both measure the path a served request takes.
 */
const capacity = 1e12

function percentile(sorted: Float64Array, p: number): number {
  return sorted[Math.min(sorted.length - 1, Math.floor(p * sorted.length))]!
}

/** Decisions/s, p99 µs and share admitted of `n` calls of `decide`, in batches of `batch`. */
async function measure(
  decide: () => boolean | Promise<boolean>,
  n: number,
  async: boolean,
): Promise<{ perSec: number; p99Us: number; admitted: number }> {
  const times = new Float64Array(n)
  let admitted = 0
  let busyNs = 0n
  // Batches of 10,000 with a turn of the event loop between them: a Sluice process gets its
  // next block while it serves, as a server does (a tight loop of a million would starve it).
  for (let i = 0; i < n;) {
    const start = process.hrtime.bigint()
    for (const end = Math.min(n, i + 10_000); i < end; i++) {
      const t = process.hrtime.bigint()
      const ok = async ? await decide() : (decide() as boolean)
      times[i] = Number(process.hrtime.bigint() - t) / 1000
      if (ok) admitted++
    }
    busyNs += process.hrtime.bigint() - start
    await sleep(1)
  }
  times.sort()
  return {
    perSec: n / (Number(busyNs) / 1e9),
    p99Us: percentile(times, 0.99),
    admitted: admitted / n,
  }
}

export async function benchQuota(runs: number): Promise<string[]> {
  const dir = await mkdtemp(join(tmpdir(), 'sluice-quota-'))
  const config = join(dir, 'sluice.json')
  await writeFile(
    config,
    JSON.stringify({
      server: { host: '127.0.0.1', limits: { roundDebounceMs: 20 } },
      resources: [
        { match: 'calls', kind: 'quota', capacity, window: '1d', refreshMs: 250 },
        { match: 'customer/*', keyed: true, kind: 'quota', capacity, window: '1d', refreshMs: 250 },
      ],
    }),
  )
  const coordinator = new CoordinatorProcess(config, await freePort())
  await coordinator.start()
  const rows: string[] = []
  const fmt = medianRange
  const pct = (values: number[]): string => `${(summarise(values).median * 100).toFixed(1)}%`
  try {
    const client = createClient({
      url: `ws://127.0.0.1:${coordinator.port}/v1/connect`,
      clientId: 'bench-quota',
    })
    client.on('error', () => undefined)
    const calls: Resource = client.resource('calls', { kind: 'quota' })
    await calls.ready({ timeoutMs: 10_000 })
    // A first run sizes the blocks to this demand; it is not counted.
    await measure(() => calls.tryAcquire(), 1_000_000, false)
    const sluice = { perSec: [] as number[], p99: [] as number[], admitted: [] as number[] }
    for (let r = 0; r < runs; r++) {
      const m = await measure(() => calls.tryAcquire(), 1_000_000, false)
      sluice.perSec.push(m.perSec)
      sluice.p99.push(m.p99Us)
      sluice.admitted.push(m.admitted)
    }
    // A keyed quota: a budget per customer, 1,000 customers in turn (each key's first decision
    // makes its entry; the runs after the first find every key tracked).
    const perCustomer = client.keyed('customer')
    await perCustomer.ready({ timeoutMs: 10_000 })
    const customers = Array.from({ length: 1000 }, (_, i) => `customer-${i}`)
    let next = 0
    const decideKeyed = (): boolean => {
      next = next === customers.length - 1 ? 0 : next + 1
      return perCustomer.tryAcquire(customers[next]!)
    }
    await measure(decideKeyed, 1_000_000, false)
    const keyed = { perSec: [] as number[], p99: [] as number[], admitted: [] as number[] }
    for (let r = 0; r < runs; r++) {
      const m = await measure(decideKeyed, 1_000_000, false)
      keyed.perSec.push(m.perSec)
      keyed.p99.push(m.p99Us)
      keyed.admitted.push(m.admitted)
    }
    await client.close()
    rows.push(
      `| Sluice \`resource('calls', { kind: 'quota' }).tryAcquire()\` (in-process) | ${fmt(sluice.perSec)} | ${fmt(sluice.p99, ' µs')} | ${pct(sluice.admitted)} | 1.00× |`,
      `| Sluice keyed quota \`keyed('customer').tryAcquire(key)\`, 1,000 keys in turn (in-process) | ${fmt(keyed.perSec)} | ${fmt(keyed.p99, ' µs')} | ${pct(keyed.admitted)} | ${(summarise(sluice.perSec).median / summarise(keyed.perSec).median).toFixed(2)}× |`,
    )

    const store = await startRedis(dir)
    if (store === undefined)
      rows.push('| RateLimiterRedis | not run (no redis-server) | — | — | — |')
    else {
      try {
        const limiter = new RateLimiterRedis({
          storeClient: store.redis,
          points: capacity,
          duration: 86_400,
          keyPrefix: 'bench-quota',
        })
        const r = { perSec: [] as number[], p99: [] as number[], admitted: [] as number[] }
        for (let i = 0; i < runs; i++) {
          const m = await measure(
            () =>
              limiter.consume('calls').then(
                () => true,
                () => false,
              ),
            20_000,
            true,
          )
          r.perSec.push(m.perSec)
          r.p99.push(m.p99Us)
          r.admitted.push(m.admitted)
        }
        rows.push(
          `| rate-limiter-flexible \`RateLimiterRedis.consume('calls')\`, duration 86,400 s (redis-server on a unix socket, awaited) | ${fmt(r.perSec)} | ${fmt(r.p99, ' µs')} | ${pct(r.admitted)} | ${(summarise(sluice.perSec).median / summarise(r.perSec).median).toFixed(0)}× |`,
        )
      } finally {
        store.stop()
      }
    }
  } finally {
    await coordinator.stop()
    await rm(dir, { recursive: true, force: true })
  }
  return rows
}
