import { spawn, spawnSync, type ChildProcess } from 'node:child_process'
import { availableParallelism } from 'node:os'
import autocannon from 'autocannon'
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
  [
    'fastify-lean',
    "fastify + `fastifyRateLimit`, `headers: 'ietf-lean'` (RateLimit-Policy on a key's first response and refusals)",
    'fastify-none',
  ],
  ['fastify-peer', 'fastify + @fastify/rate-limit (in memory, its defaults)', 'fastify-none'],
  ['express-none', 'Express hello route', undefined],
  ['express-sluice', 'Express + `createRateLimitMiddleware`', 'express-none'],
  ['express-peer', 'Express + express-rate-limit (in memory, its defaults)', 'express-none'],
  ['node-none', 'node:http hello route', undefined],
  ['node-sluice', 'node:http + `createRateLimitMiddleware`', 'node-none'],
] as const
/**
 * What a limiter's cost is made of, for the instruction counts: an empty
 * onRequest hook, then one and two constant header fields set in it. Run
 * only when named in BENCH_HTTP_VARIANTS.
 */
const parts = [
  ['fastify-hook', 'fastify + an empty onRequest hook', 'fastify-none'],
  ['fastify-field', 'fastify + a hook setting one constant header field', 'fastify-none'],
  ['fastify-fields', 'fastify + a hook setting two constant header fields', 'fastify-none'],
] as const
type Variant = (typeof variants)[number][0] | (typeof parts)[number][0]

/** The variants BENCH_HTTP_VARIANTS names (the parts only when named), else every one but the parts. */
function chosenVariants(): readonly (readonly [Variant, string, Variant | undefined])[] {
  const only = process.env.BENCH_HTTP_VARIANTS?.split(',')
  if (only === undefined) return variants
  return [...variants, ...parts].filter(([v]) => only.includes(v))
}

/**
 * On two cores or more, the server runs alone on core 0 and this process
 * (autocannon) on core 1, so neither steals the other's time: the noise
 * that hid a few percent of overhead. BENCH_HTTP_PIN=0 turns it off;
 * without `taskset` (util-linux) nothing is pinned.
 */
const pin =
  process.env.BENCH_HTTP_PIN !== '0' &&
  availableParallelism() >= 2 &&
  spawnSync('taskset', ['-V']).status === 0
const serverCpu = 0
const loadCpu = 1

function pinned(cpu: number, command: string[]): [string, string[]] {
  return pin ? ['taskset', ['-c', String(cpu), ...command]] : [command[0]!, command.slice(1)]
}

/** The server's CPU time so far, µs: in user space, and in all (its own getrusage, over IPC). */
function cpuTimeUs(child: ChildProcess): Promise<{ userUs: number; totalUs: number }> {
  return new Promise((resolve, reject) => {
    child.once('message', (m) => {
      const { user, system } = m as NodeJS.CpuUsage
      resolve({ userUs: user, totalUs: user + system })
    })
    child.once('exit', () => reject(new Error('server exited')))
    child.send('cpu')
  })
}

/** The port a bench server prints once it listens (`port N`); rejects if it exits first. */
function portOf(child: ChildProcess, why: () => string = () => ''): Promise<number> {
  return new Promise<number>((resolve, reject) => {
    let out = ''
    child.stdout!.on('data', (chunk: Buffer) => {
      out += chunk.toString()
      const match = /port (\d+)/.exec(out)
      if (match) resolve(Number(match[1]))
    })
    child.once('exit', (code) => reject(new Error(`server exited with ${code} ${why()}`.trim())))
  })
}

async function serve(
  variant: Variant,
): Promise<{ url: string; child: ChildProcess; stop: () => Promise<void> }> {
  const child = spawn(
    ...pinned(serverCpu, [process.execPath, 'dist/bench/http-server.js', variant]),
    {
      stdio: ['ignore', 'pipe', 'inherit', 'ipc'],
    },
  )
  const port = await portOf(child)
  return {
    url: `http://127.0.0.1:${port}/hello`,
    child,
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
 * The server's CPU per request at a fixed rate: at saturation requests/s also
 * measures autocannon parsing the responses; CPU per request at the same rate
 * measures the server alone. User space apart: a limiter's work is all there,
 * while the kernel's share (the loopback writes) varies from run to run by
 * more than a limiter costs.
 */
async function cpuPerRequestUs(
  url: string,
  child: ChildProcess,
  durationSec: number,
): Promise<{ userUs: number; totalUs: number }> {
  const before = await cpuTimeUs(child)
  const result = await autocannon({
    url,
    connections: 50,
    pipelining: 1,
    duration: durationSec,
    overallRate: fixedRatePerSec,
  })
  const after = await cpuTimeUs(child)
  const n = result.requests.total
  return {
    userUs: (after.userUs - before.userUs) / n,
    totalUs: (after.totalUs - before.totalUs) / n,
  }
}

type Summary = ReturnType<typeof summarise>

/**
 * How far a median lies from the base variant's median, in percent: more
 * (CPU, instructions) or, with `lower`, less (throughput lost). '—' without
 * base samples.
 */
function change(median: number, baseSamples: readonly number[], lower = false): string {
  if (baseSamples.length === 0) return '—'
  const b = summarise(baseSamples).median
  return `${(((lower ? b - median : median - b) / b) * 100).toFixed(1)}%`
}

export async function benchHttp(runs: number, durationSec: number): Promise<string[]> {
  // BENCH_HTTP_VARIANTS=fastify-none,fastify-sluice runs only those.
  const chosen = chosenVariants()
  const rps = new Map<Variant, number[]>(chosen.map(([v]) => [v, []]))
  const cpu = new Map<Variant, number[]>(chosen.map(([v]) => [v, []]))
  const user = new Map<Variant, number[]>(chosen.map(([v]) => [v, []]))
  if (pin) spawnSync('taskset', ['-a', '-p', '-c', String(loadCpu), String(process.pid)])
  for (let r = 0; r < runs; r++) {
    for (const [variant] of chosen) {
      const server = await serve(variant)
      try {
        await load(server.url, 1) // warm-up
        rps.get(variant)!.push(await load(server.url, durationSec))
        const used = await cpuPerRequestUs(server.url, server.child, durationSec)
        cpu.get(variant)!.push(used.totalUs)
        user.get(variant)!.push(used.userUs)
      } finally {
        await server.stop()
      }
    }
  }
  const f = (s: { median: number; min: number; max: number }, d = 0): string =>
    `${s.median.toLocaleString('en-US', { maximumFractionDigits: d, minimumFractionDigits: d })} (${s.min.toLocaleString('en-US', { maximumFractionDigits: d, minimumFractionDigits: d })}–${s.max.toLocaleString('en-US', { maximumFractionDigits: d, minimumFractionDigits: d })})`
  return chosen.map(([variant, what, base]) => {
    const against = (samples: Map<Variant, number[]>, lower = false): string => {
      const b = base === undefined ? undefined : samples.get(base)
      return b === undefined ? '—' : change(summarise(samples.get(variant)!).median, b, lower)
    }
    const [r, c, u] = [rps, cpu, user].map((m) => summarise(m.get(variant)!)) as [
      Summary,
      Summary,
      Summary,
    ]
    return `| ${what} | ${f(r)} | ${against(rps, true)} | ${f(c, 1)} | ${against(cpu)} | ${f(u, 2)} | ${against(user)} |`
  })
}

/**
 * Instructions the server executes per request, counted by valgrind
 * (cachegrind, no cache simulation): the slope between a run of `fewer`
 * requests and one of `more`, so start-up and JIT warm-up cancel out.
 * One connection, one request at a time, the two counts taken one after the
 * other, V8 run `--predictable`, no IPC channel: a bare route's count then
 * repeats within about 0.7%, where time varies 15–25% on this shared machine
 * (docs/benchmarks.md). Nothing else should run meanwhile: a busy machine
 * changes how the server's event loop meets the requests.
 */
async function instructions(variant: Variant, requests: number): Promise<number> {
  const child = spawn(
    'valgrind',
    [
      '--tool=cachegrind',
      '--cache-sim=no',
      '--cachegrind-out-file=/dev/null',
      process.execPath,
      // V8 without its timing-dependent work (concurrent compiling and marking, heap growth by
      // allocation rate): with the counts taken one after the other, within about 0.7%.
      '--predictable',
      'dist/bench/http-server.js',
      variant,
    ],
    // No IPC channel: under valgrind it sometimes added billions of instructions to a count.
    { stdio: ['ignore', 'pipe', 'pipe'] },
  )
  let err = ''
  child.stderr.on('data', (chunk: Buffer) => (err += chunk.toString()))
  const port = await portOf(child, () => err)
  await autocannon({
    url: `http://127.0.0.1:${port}/hello`,
    connections: 1,
    amount: requests,
    timeout: 60,
  })
  const exited = new Promise((resolve) => child.once('exit', resolve))
  child.kill('SIGTERM')
  await exited
  const match = /I\s+refs:\s+([\d,]+)/.exec(err)
  if (match === null) throw new Error(`no instruction count from valgrind: ${err.slice(-500)}`)
  return Number(match[1]!.replaceAll(',', ''))
}

export async function benchHttpInstructions(runs: number): Promise<string[]> {
  const chosen = chosenVariants()
  const fewer = 10_000
  const more = 30_000
  const perRequest = new Map<Variant, number[]>(chosen.map(([v]) => [v, []]))
  for (let r = 0; r < runs; r++)
    for (const [variant] of chosen) {
      // One after the other: two counts taken side by side differed by about ±10% between runs,
      // one after the other by 0.2% (docs/benchmarks.md).
      const a = await instructions(variant, fewer)
      const b = await instructions(variant, more)
      perRequest.get(variant)!.push((b - a) / (more - fewer))
    }
  const n = (x: number): string => Math.round(x).toLocaleString('en-US')
  return chosen.map(([variant, what, base]) => {
    const s = summarise(perRequest.get(variant)!)
    const b = base === undefined ? undefined : perRequest.get(base)
    const added =
      b === undefined || b.length === 0
        ? '—'
        : `${n(s.median - summarise(b).median)} (${change(s.median, b)})`
    return `| ${what} | ${n(s.median)} (${n(s.min)}–${n(s.max)}) | ${added} |`
  })
}
