import { spawn, spawnSync, type ChildProcess } from 'node:child_process'
import { existsSync } from 'node:fs'
import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { allocate } from '../server/allocation/index.js'
import { jain } from '../server/sim/metrics.js'
import { procStats, spawnCoordinator } from './coordinator.js'
import { summarise } from './stats.js'

// End to end: a global limit of 1000 requests/s shared by 8 processes under skewed demand,
// enforced by (a) Sluice, (b) rate-limiter-flexible's RateLimiterRedis on a real redis-server,
// (c) a static split of 1000/8 per process. Each process is a real OS process (bench/e2e-worker).

export const limitPerSec = 1000
export const demands = [800, 400, 200, 100, 100, 50, 50, 50]
const warmupMs = 3000
const measureMs = Number(process.env.BENCH_E2E_MS ?? 8000)
type Mode = 'sluice' | 'redis' | 'static'

interface WorkerResult {
  id: number
  attempted: number
  admitted: number
  cpuUs: number
  latencyMs: number[]
}

export interface E2eRun {
  admittedPerSec: number
  admittedOverLimit: number
  utilisation: number
  jain: number
  p99Us: number
  cpuUsPerDecision: number
}

async function infrastructure(
  mode: Mode,
  dir: string,
): Promise<{ child?: ChildProcess; url?: string; redisSocket?: string }> {
  if (mode === 'sluice') {
    const { child, wsUrl } = await spawnCoordinator(
      `resources:\n  - { match: e2e, kind: rate, capacity: ${limitPerSec}, leaseTtlMs: 5000, refreshMs: 500, graceMs: 1000, learningMs: 0, unsafeLearning: true }\n`,
    )
    return { child, url: wsUrl }
  }
  if (mode === 'redis') {
    const redisPath = spawnSync('which', ['redis-server']).stdout.toString().trim()
    if (redisPath === '') throw new Error('no redis-server: apt-get install redis-server')
    const redisSocket = join(dir, 'redis.sock')
    const child = spawn(
      redisPath,
      [
        '--port',
        '0',
        '--unixsocket',
        redisSocket,
        '--save',
        '',
        '--appendonly',
        'no',
        '--dir',
        dir,
      ],
      { stdio: 'ignore' },
    )
    for (let i = 0; i < 250 && !existsSync(redisSocket); i++)
      await new Promise((resolve) => setTimeout(resolve, 20))
    return { child, redisSocket }
  }
  return {}
}

async function once(mode: Mode): Promise<E2eRun> {
  const dir = await mkdtemp(join(tmpdir(), 'sluice-e2e-'))
  const infra = await infrastructure(mode, dir)
  try {
    const before = infra.child?.pid === undefined ? undefined : await procStats(infra.child.pid)
    const results = await Promise.all(
      demands.map(
        (demandPerSec, id) =>
          new Promise<WorkerResult>((resolve, reject) => {
            const config = {
              mode,
              id,
              demandPerSec,
              limitPerSec,
              workers: demands.length,
              warmupMs,
              measureMs,
              url: infra.url,
              redisSocket: infra.redisSocket,
            }
            const child = spawn(
              process.execPath,
              ['dist/bench/e2e-worker.js', JSON.stringify(config)],
              {
                stdio: ['ignore', 'pipe', 'inherit'],
              },
            )
            let out = ''
            child.stdout.on('data', (chunk: Buffer) => (out += chunk.toString()))
            child.once('exit', (code) => {
              try {
                resolve(JSON.parse(out.trim().split('\n').at(-1)!) as WorkerResult)
              } catch {
                reject(new Error(`worker ${id} exited with ${code}: ${out.slice(0, 200)}`))
              }
            })
          }),
      ),
    )
    const after = infra.child?.pid === undefined ? undefined : await procStats(infra.child.pid)
    // CPU of the coordinator or redis-server over the whole run (ticks of 10 ms), spread over
    // the decisions measured: an upper bound, as it includes the warm-up.
    const infraUs =
      before === undefined || after === undefined ? 0 : (after.cpuTicks - before.cpuTicks) * 10_000
    const seconds = measureMs / 1000
    const admitted = results.reduce((s, r) => s + r.admitted, 0)
    const attempted = results.reduce((s, r) => s + r.attempted, 0)
    const cpuUs =
      results.reduce((s, r) => s + r.cpuUs, 0) + infraUs * (measureMs / (measureMs + warmupMs))
    const latencies = results.flatMap((r) => r.latencyMs).sort((a, b) => a - b)
    const ideal = allocate({
      capacity: limitPerSec,
      surplus: 'hold',
      clients: demands.map((wants, i) => ({ id: `w${i}`, wants })),
    }).grants
    const shares = results
      .sort((a, b) => a.id - b.id)
      .map((r, i) => r.admitted / seconds / ideal[i]!)
    const admittedPerSec = admitted / seconds
    return {
      admittedPerSec,
      admittedOverLimit: admittedPerSec / limitPerSec,
      utilisation: Math.min(admittedPerSec, limitPerSec) / limitPerSec,
      jain: jain(shares),
      p99Us: (latencies[Math.floor(latencies.length * 0.99)] ?? 0) * 1000,
      cpuUsPerDecision: cpuUs / Math.max(1, attempted),
    }
  } finally {
    infra.child?.kill('SIGTERM')
    await rm(dir, { recursive: true, force: true })
  }
}

/** Markdown rows, one per limiter: median (min–max) of `runs`. */
export async function benchE2e(runs: number): Promise<string[]> {
  const modes: [Mode, string][] = [
    ['sluice', 'Sluice (coordinator + 8 clients, local token buckets)'],
    [
      'redis',
      'rate-limiter-flexible `RateLimiterRedis`, one global key (redis-server, unix socket)',
    ],
    ['static', 'static split: a local token bucket of 1000/8 per process'],
  ]
  const rows: string[] = []
  for (const [mode, label] of modes) {
    const samples: E2eRun[] = []
    for (let i = 0; i < runs; i++) samples.push(await once(mode))
    const cell = (pick: (r: E2eRun) => number, digits: number, scale = 1): string => {
      const s = summarise(samples.map((r) => pick(r) * scale))
      return `${s.median.toFixed(digits)} (${s.min.toFixed(digits)}–${s.max.toFixed(digits)})`
    }
    rows.push(
      `| ${label} | ${cell((r) => r.admittedPerSec, 0)} | ${cell((r) => r.admittedOverLimit, 1, 100)}% | ${cell((r) => r.utilisation, 1, 100)}% | ${cell((r) => r.jain, 3)} | ${cell((r) => r.p99Us, 1)} | ${cell((r) => r.cpuUsPerDecision, 1)} |`,
    )
  }
  return rows
}
