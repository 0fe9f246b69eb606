import { spawn } from 'node:child_process'
import autocannon from 'autocannon'
import { procStats } from './coordinator.js'
import { summarise } from './stats.js'

/**
 * Throughput of a hello route on fastify, Express and plain node:http, bare
 * and behind each rate limiter (Sluice's, and the peers each framework's
 * users reach for: @fastify/rate-limit, express-rate-limit), every request
 * allowed, under autocannon on loopback. Each server runs in its own
 * process; runs alternate between the variants so drift hits all alike.
 */
const variants = [
  ['fastify-none', 'fastify hello route', undefined],
  [
    'fastify-skip',
    'fastify + `fastifyRateLimit`, every request skipped (the hook alone)',
    'fastify-none',
  ],
  [
    'fastify-sluice',
    'fastify + `fastifyRateLimit` (per-IP token bucket, IETF headers)',
    'fastify-none',
  ],
  ['fastify-peer', 'fastify + @fastify/rate-limit (in memory, its defaults)', 'fastify-none'],
  ['express-none', 'Express hello route', undefined],
  ['express-sluice', 'Express + `createRateLimitMiddleware`', 'express-none'],
  ['express-peer', 'Express + express-rate-limit (in memory, its defaults)', 'express-none'],
  ['node-none', 'node:http hello route', undefined],
  ['node-sluice', 'node:http + `createRateLimitMiddleware`', 'node-none'],
] as const
type Variant = (typeof variants)[number][0]

async function serve(
  variant: Variant,
): Promise<{ url: string; pid: number; stop: () => Promise<void> }> {
  const child = spawn(process.execPath, ['dist/bench/http-server.js', variant], {
    stdio: ['ignore', 'pipe', 'inherit'],
  })
  const port = await new Promise<number>((resolve, reject) => {
    let out = ''
    child.stdout.on('data', (chunk: Buffer) => {
      out += chunk.toString()
      const match = /port (\d+)/.exec(out)
      if (match) resolve(Number(match[1]))
    })
    child.once('exit', (code) => reject(new Error(`server exited with ${code}`)))
  })
  return {
    url: `http://127.0.0.1:${port}/hello`,
    pid: child.pid!,
    stop: () =>
      new Promise<void>((resolve) => {
        child.once('exit', () => resolve())
        child.kill('SIGTERM')
      }),
  }
}

async function load(url: string, durationSec: number): Promise<number> {
  const result = await autocannon({ url, connections: 50, pipelining: 1, duration: durationSec })
  return result.requests.average
}

/** The rate of the fixed-load runs: well below what any variant serves, so all serve the same. */
const fixedRatePerSec = 10_000

/**
 * The server's CPU per request at a fixed rate: the load generator shares the
 * two cores, so at saturation requests/s also measures autocannon parsing the
 * responses; CPU per request at the same rate measures the server alone.
 */
async function cpuPerRequestUs(url: string, pid: number, durationSec: number): Promise<number> {
  const before = await procStats(pid)
  const result = await autocannon({
    url,
    connections: 50,
    pipelining: 1,
    duration: durationSec,
    overallRate: fixedRatePerSec,
  })
  const after = await procStats(pid)
  const ticksPerSec = 100 // Linux USER_HZ
  return (((after.cpuTicks - before.cpuTicks) / ticksPerSec) * 1e6) / result.requests.total
}

export async function benchHttp(runs: number, durationSec: number): Promise<string[]> {
  // BENCH_HTTP_VARIANTS=fastify-none,fastify-sluice runs only those.
  const only = process.env.BENCH_HTTP_VARIANTS?.split(',')
  const chosen = variants.filter(([v]) => only === undefined || only.includes(v))
  const rps = new Map<Variant, number[]>(chosen.map(([v]) => [v, []]))
  const cpu = new Map<Variant, number[]>(chosen.map(([v]) => [v, []]))
  for (let r = 0; r < runs; r++) {
    for (const [variant] of chosen) {
      const server = await serve(variant)
      try {
        await load(server.url, 1) // warm-up
        rps.get(variant)!.push(await load(server.url, durationSec))
        cpu.get(variant)!.push(await cpuPerRequestUs(server.url, server.pid, durationSec))
      } finally {
        await server.stop()
      }
    }
  }
  const f = (s: { median: number; min: number; max: number }, d = 0): string =>
    `${s.median.toLocaleString('en-US', { maximumFractionDigits: d, minimumFractionDigits: d })} (${s.min.toLocaleString('en-US', { maximumFractionDigits: d, minimumFractionDigits: d })}–${s.max.toLocaleString('en-US', { maximumFractionDigits: d, minimumFractionDigits: d })})`
  const more = (x: number, base: number): string => `${(((x - base) / base) * 100).toFixed(1)}%`
  return chosen.map(([variant, what, base]) => {
    const r = summarise(rps.get(variant)!)
    const c = summarise(cpu.get(variant)!)
    const baseRps = base === undefined ? undefined : rps.get(base)
    const baseCpu = base === undefined ? undefined : cpu.get(base)
    const rpsOverhead =
      baseRps === undefined || baseRps.length === 0
        ? '—'
        : `${(((summarise(baseRps).median - r.median) / summarise(baseRps).median) * 100).toFixed(1)}%`
    const cpuOverhead =
      baseCpu === undefined || baseCpu.length === 0
        ? '—'
        : more(c.median, summarise(baseCpu).median)
    return `| ${what} | ${f(r)} | ${rpsOverhead} | ${f(c, 1)} | ${cpuOverhead} |`
  })
}
