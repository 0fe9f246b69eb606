import { spawn, type ChildProcess } from 'node:child_process'
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { LoadClients } from './load.js'
import { summarise } from './stats.js'

/**
 * Coordinator load: `clients` simulated clients over real WebSockets on
 * loopback, spread over `resources` resources, each reporting demand every
 * second (staggered across the second). Measures report→lease latency (the
 * renewal the coordinator sends in reply to each report), and the
 * coordinator process's CPU and RSS, read from /proc.
 */
export interface CoordinatorBenchResult {
  clients: number
  resources: number
  reports: number
  /** Leases the clients received per second, per client. */
  leasesPerClientSec: number
  p50Ms: number
  p99Ms: number
  maxMs: number
  /** The earlier measure: the 99th percentile from a client's latest report to any lease (see LoadClients). */
  p99SinceReportMs: number
  cpuPercent: number
  rssMb: number
  /** The coordinator's own event-loop lag p99 (prom-client's nodejs_eventloop_lag_p99_seconds), ms. */
  coordinatorLoopLagP99Ms: number
  /** Ledger writes per second during the measurement (the embedded file ledger). */
  ledgerWritesPerSec: number
  /** The upper bound of the histogram bucket holding the 99th percentile write, ms. */
  ledgerWriteP99Ms: number
}

export function procStats(pid: number): Promise<{ cpuTicks: number; rssMb: number }> {
  return Promise.all([
    readFile(`/proc/${pid}/stat`, 'utf8'),
    readFile(`/proc/${pid}/status`, 'utf8'),
  ]).then(([stat, status]) => {
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ')
    const cpuTicks = Number(fields[11]) + Number(fields[12]) // utime + stime (fields 14 and 15)
    const rssKb = Number(/VmRSS:\s+(\d+)/.exec(status)?.[1] ?? 0)
    return { cpuTicks, rssMb: rssKb / 1024 }
  })
}

async function metricsText(wsUrl: string): Promise<string> {
  const res = await fetch(`${wsUrl.replace(/^ws/, 'http').replace(/\/v1\/connect$/, '')}/metrics`)
  return res.text()
}

function loopLagP99Ms(text: string): number {
  return Number(/^sluice_nodejs_eventloop_lag_p99_seconds (\S+)$/m.exec(text)?.[1] ?? NaN) * 1000
}

/** Ledger writes so far, and the bucket counts of their durations (le → count). */
function ledgerFigures(text: string): { writes: number; buckets: [number, number][] } {
  const writes = Number(/^sluice_ledger_writes_total (\S+)$/m.exec(text)?.[1] ?? 0)
  const buckets: [number, number][] = []
  for (const m of text.matchAll(/^sluice_ledger_write_seconds_bucket\{le="([^"]+)"\} (\S+)$/gm))
    buckets.push([m[1] === '+Inf' ? Infinity : Number(m[1]), Number(m[2])])
  return { writes, buckets }
}

/** The upper bound of the bucket holding the 99th percentile of the writes between two readings. */
function p99BucketMs(before: [number, number][], after: [number, number][]): number {
  const counts = after.map(([le, n], i) => [le, n - (before[i]?.[1] ?? 0)] as const)
  const total = counts.at(-1)?.[1] ?? 0
  if (total === 0) return NaN
  const found = counts.find(([, n]) => n >= 0.99 * total)
  return found === undefined ? NaN : found[0] * 1000
}

/** Runs `sluice serve` on a config text in a temporary folder; resolves once it listens. */
export async function spawnCoordinator(
  configText: string,
): Promise<{ child: ChildProcess; wsUrl: string }> {
  const dir = await mkdtemp(join(tmpdir(), 'sluice-bench-'))
  const file = join(dir, 'bench.yaml')
  await writeFile(file, configText)
  // BENCH_LEDGER=none measures without the embedded ledger.
  const started = await spawnServe(
    file,
    0,
    process.env.BENCH_LEDGER === 'none' ? 'none' : join(dir, 'data'),
  )
  started.child.once('exit', () => void rm(dir, { recursive: true, force: true }))
  return started
}

/** Runs `sluice serve` on a config file, port and data directory; resolves once it listens. */
export function spawnServe(
  configFile: string,
  port: number,
  dataDir: string,
): Promise<{ child: ChildProcess; wsUrl: string }> {
  return listening(
    spawn(
      process.execPath,
      [
        'dist/server/cli/bin.js',
        'serve',
        '--config',
        configFile,
        '--port',
        String(port),
        '--data-dir',
        dataDir,
      ],
      {
        env: { ...process.env, SLUICE_LOG_LEVEL: 'warn' },
        stdio: ['ignore', 'pipe', 'inherit'],
      },
    ),
  )
}

/** Resolves with the WebSocket URL a server prints once it listens ("clients connect to …"). */
function listening(child: ChildProcess): Promise<{ child: ChildProcess; wsUrl: string }> {
  return new Promise((resolve, reject) => {
    let out = ''
    child.stdout!.on('data', (chunk: Buffer) => {
      out += chunk.toString()
      const match = /clients connect to (ws:\/\/\S+)\)/.exec(out)
      if (match) resolve({ child, wsUrl: match[1]! })
    })
    child.once('exit', (code) => reject(new Error(`server exited with ${code}`)))
  })
}

function startServer(resources: number): Promise<{ child: ChildProcess; wsUrl: string }> {
  // BENCH_FLOOR=net|ws|ws-json: the same load on a server that does no Sluice work
  // (bench/transport-floor.ts), to see what the transport alone costs.
  const floor = process.env.BENCH_FLOOR
  if (floor !== undefined)
    return listening(
      spawn(process.execPath, ['dist/bench/transport-floor.js', floor], {
        stdio: ['ignore', 'pipe', 'inherit'],
      }),
    )
  return spawnCoordinator(benchConfig(resources))
}

/**
 * The benchmark's config: `resources` rate resources r0, r1, …, no learning on a first start.
 * Each has capacity 100,000 (far above demand), or BENCH_CAPACITY (e.g. below it).
 */
export function benchConfig(resources: number): string {
  const capacity = Number(process.env.BENCH_CAPACITY ?? 100_000)
  const templates = Array.from(
    { length: resources },
    (_, i) =>
      `  - { match: "r${i}", kind: rate, capacity: ${capacity}, learningMs: 0, unsafeLearning: true }`,
  )
  return `server:\n  limits: { maxClients: 50000 }\nresources:\n${templates.join('\n')}\n`
}

export async function benchCoordinatorOnce(
  clients: number,
  resources: number,
  measureMs: number,
): Promise<void> {
  console.log(JSON.stringify(await benchCoordinator(clients, resources, measureMs)))
}

export async function benchCoordinator(
  clients: number,
  resources: number,
  measureMs: number,
): Promise<CoordinatorBenchResult> {
  // BENCH_URL: load an already running coordinator (e.g. one started under a profiler) instead.
  const external = process.env.BENCH_URL
  // BENCH_USAGE=1: reports carry usage (admitted, refused, …) and hellos a name and library.
  const withUsage = process.env.BENCH_USAGE === '1'
  const { child, wsUrl } =
    external === undefined ? await startServer(resources) : { child: undefined, wsUrl: external }
  // BENCH_VARIANTS=n: each client cycles through n reports whose demand differs by up to ±20%.
  const variants = Number(process.env.BENCH_VARIANTS ?? 1)
  const load = new LoadClients(wsUrl, { clients, resources, withUsage, variants })
  try {
    await load.connectAll()
    load.start()

    // Warm-up: leases settle. BENCH_WARMUP_MS: longer, to measure after the rounds that follow a
    // large ramp have settled too (3 s by default, as every figure in docs/benchmarks.md).
    await new Promise((resolve) => setTimeout(resolve, Number(process.env.BENCH_WARMUP_MS ?? 3000)))
    load.measuring = true
    const pid = child?.pid ?? Number(process.env.BENCH_PID)
    const ledgerBefore = ledgerFigures(await metricsText(wsUrl))
    const before = await procStats(pid)
    const startMs = performance.now()
    await new Promise((resolve) => setTimeout(resolve, measureMs))
    const after = await procStats(pid)
    const elapsedMs = performance.now() - startMs
    const text = await metricsText(wsUrl)
    const coordinatorLoopLagP99Ms = loopLagP99Ms(text)
    const ledgerAfter = ledgerFigures(text)
    load.measuring = false
    load.stop()

    const sorted = load.latencies.slice().sort((a, b) => a - b)
    const at = (q: number, from = sorted): number =>
      from[Math.min(from.length - 1, Math.floor(q * from.length))] ?? NaN
    const sinceReport = load.latenciesSinceReport.slice().sort((a, b) => a - b)
    const ticksPerSec = 100 // Linux USER_HZ
    return {
      clients,
      resources,
      reports: load.latencies.length,
      leasesPerClientSec: load.leasesMeasured / clients / (elapsedMs / 1000),
      p50Ms: at(0.5),
      p99Ms: at(0.99),
      maxMs: sorted.at(-1) ?? NaN,
      p99SinceReportMs: at(0.99, sinceReport),
      cpuPercent: ((after.cpuTicks - before.cpuTicks) / ticksPerSec / (elapsedMs / 1000)) * 100,
      rssMb: after.rssMb,
      coordinatorLoopLagP99Ms,
      ledgerWritesPerSec: (ledgerAfter.writes - ledgerBefore.writes) / (elapsedMs / 1000),
      ledgerWriteP99Ms: p99BucketMs(ledgerBefore.buckets, ledgerAfter.buckets),
    }
  } finally {
    load.close()
    if (child !== undefined) {
      child.kill('SIGTERM')
      await new Promise((resolve) => child.once('exit', resolve))
    }
  }
}

export async function benchCoordinatorRows(runs: number, measureMs: number): Promise<string[]> {
  const rows: string[] = []
  // BENCH_COORDINATOR_SIZES=1000x1,10000x1 runs only those sizes.
  const sizes =
    process.env.BENCH_COORDINATOR_SIZES?.split(',').map(
      (s) => s.split('x').map(Number) as [number, number],
    ) ??
    ([
      [1_000, 1],
      [1_000, 10],
      [10_000, 1],
      [10_000, 10],
    ] as const)
  for (const [clients, resources] of sizes) {
    const results: CoordinatorBenchResult[] = []
    for (let r = 0; r < runs; r++)
      results.push(await benchCoordinator(clients, resources, measureMs))
    const p50 = summarise(results.map((x) => x.p50Ms))
    const p99 = summarise(results.map((x) => x.p99Ms))
    const cpu = summarise(results.map((x) => x.cpuPercent))
    const rss = summarise(results.map((x) => x.rssMb))
    const lag = summarise(results.map((x) => x.coordinatorLoopLagP99Ms))
    const f = (s: { median: number; min: number; max: number }, d = 1): string =>
      `${s.median.toFixed(d)} (${s.min.toFixed(d)}–${s.max.toFixed(d)})`
    const writes = summarise(results.map((x) => x.ledgerWritesPerSec))
    const writeP99 = summarise(results.map((x) => x.ledgerWriteP99Ms))
    const leases = summarise(results.map((x) => x.leasesPerClientSec))
    const sinceReport = summarise(results.map((x) => x.p99SinceReportMs))
    rows.push(
      `| ${clients.toLocaleString('en-US')} | ${resources} | ${results[0]!.reports.toLocaleString('en-US')} | ${f(p50, 2)} | ${f(p99, 2)} | ${f(cpu)} | ${f(rss)} | ${f(lag)} | ${f(writes, 0)} | ≤ ${f(writeP99, 1)} | ${f(leases, 2)} | ${f(sinceReport, 2)} |`,
    )
  }
  return rows
}
