import { spawn, spawnSync, type ChildProcess } from 'node:child_process'
import { mkdtempSync, readFileSync, rmSync } from 'node:fs'
import { availableParallelism, tmpdir } from 'node:os'
import { join } from 'node:path'
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
    "fastify + `fastifyRateLimit` (per-IP token bucket, its default headers: `'ietf-lean'`, RateLimit-Policy on a key's first response and refusals)",
    'fastify-none',
  ],
  [
    'fastify-full',
    "fastify + `fastifyRateLimit`, `headers: 'ietf'` (RateLimit-Policy on every response)",
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
 * (callgrind) inside one server process: 5,000 requests uncounted (start-up
 * and JIT warm-up), counting switched on (`callgrind_control -i on`), 10,000
 * requests, a dump, then `requests` more and a second dump, which holds only
 * those. The first counted window is dropped: it carries a fixed cost of the
 * switch (about 600 million instructions here). One connection, one request
 * at a time, V8 run `--predictable`, no IPC channel. A bare route's count
 * repeats within about 0.1%, a limited one's mostly within 0.4%, with an
 * outlier about one count in ten: read medians of three runs or more
 * (docs/benchmarks.md: the earlier slope between two processes, 10,000 and
 * 30,000 requests, moved by up to 3,000 with the start-up of the smaller
 * one). Nothing else should run meanwhile: a busy machine changes how the
 * server's event loop meets the requests.
 */
async function instructions(variant: Variant, requests: number): Promise<number> {
  const dir = mkdtempSync(join(tmpdir(), 'sluice-callgrind-'))
  const out = join(dir, 'callgrind.out')
  const child = spawn(
    'valgrind',
    [
      '--tool=callgrind',
      '--instr-atstart=no',
      `--callgrind-out-file=${out}`,
      process.execPath,
      // V8 without its timing-dependent work (concurrent compiling and marking, heap growth by
      // allocation rate).
      '--predictable',
      'dist/bench/http-server.js',
      variant,
    ],
    // No IPC channel: under valgrind it sometimes added billions of instructions to a count.
    { stdio: ['ignore', 'pipe', 'pipe'] },
  )
  let err = ''
  child.stderr.on('data', (chunk: Buffer) => (err += chunk.toString()))
  try {
    const port = await portOf(child, () => err)
    const send = (amount: number) =>
      autocannon({ url: `http://127.0.0.1:${port}/hello`, connections: 1, amount, timeout: 60 })
    const control = (...args: string[]): void => {
      const done = spawnSync('callgrind_control', [...args, String(child.pid)], {
        encoding: 'utf8',
      })
      if (done.status !== 0) throw new Error(`callgrind_control ${args.join(' ')}: ${done.stderr}`)
    }
    await send(5_000)
    control('-i', 'on')
    await send(10_000)
    control('-d')
    await send(requests)
    control('-d')
    const exited = new Promise((resolve) => child.once('exit', resolve))
    child.kill('SIGTERM')
    await exited
    // Each dump holds what was counted since the one before: the second, `requests` only.
    const match = /^totals:\s+(\d+)/m.exec(readFileSync(`${out}.2`, 'utf8'))
    if (match === null) throw new Error(`no instruction count from callgrind: ${err.slice(-500)}`)
    return Number(match[1]) / requests
  } finally {
    if (child.exitCode === null) child.kill('SIGKILL')
    rmSync(dir, { recursive: true, force: true })
  }
}

export async function benchHttpInstructions(runs: number): Promise<string[]> {
  const chosen = chosenVariants()
  const perRequest = new Map<Variant, number[]>(chosen.map(([v]) => [v, []]))
  // One server at a time: counts taken side by side differed by about ±10% (docs/benchmarks.md).
  for (let r = 0; r < runs; r++)
    for (const [variant] of chosen)
      perRequest.get(variant)!.push(await instructions(variant, 20_000))
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
