import { spawn } from 'node:child_process'
import { mkdtemp, rm, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { createClient, type KeyedFamily, type SluiceClient } from '../client/index.js'
import { CoordinatorProcess, freePort, sleep } from './faults/harness.js'
import { hostMs } from './faults/host-time.js'
import { findRoot } from './faults/workers.js'
import WebSocket from 'ws'

/**
 * Remote decisions at the coordinator (#41: p99 ≤ 1 ms on loopback, ≥ 50k decisions/s per
 * coordinator). A real coordinator (`sluice serve`) on loopback, and `processes` clients in this
 * process, each checking a crowded keyed family through `decide`: past five processes that
 * decide remotely, none holds a default share and the coordinator's own part holds every key,
 * so every check is asked of the coordinator, batched per connection (client/remote.ts).
 * Keys are drawn uniformly from `keys`, each with room for every check (capacity and burst
 * 10,000), so what is timed is the round trip and the coordinator's work, not refusals.
 *
 * Two phases after a warm-up: `paced`, a fixed total rate of asks spread over the clients
 * each millisecond-ish tick (latency at a load a gateway fleet sends); `saturated`, each
 * client keeping `window` asks in flight (throughput). Latency is ask to answer, host
 * monotonic time.
 */
export interface RemoteBenchOptions {
  /**
   * `quota`: the family is a keyed quota (10,000 a key a 1 h window), whose admitted answers
   * wait for what the coordinator's part spent to be in the ledger when it is not yet
   * (server/coordinator/spend-reserve.ts): keys drawn uniformly from many are mostly new to it.
   */
  readonly kind?: 'rate' | 'quota'
  readonly processes: number
  readonly keys: number
  readonly pacedPerSec: number
  readonly window: number
  readonly measureMs: number
}

export interface RemoteBenchRow {
  readonly phase: string
  readonly askedPerSec: number
  readonly answeredPerSec: number
  readonly admittedShare: number
  readonly p50Ms: number
  readonly p99Ms: number
  readonly p999Ms: number
}

const quantile = (sorted: Float64Array, q: number): number =>
  sorted.length === 0
    ? Number.NaN
    : sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))]!

/** One phase's row: rates over `seconds`, and the latencies' quantiles. */
function phaseRow(
  phase: string,
  seconds: number,
  counts: { asked: number; answered: number; admitted: number },
  latencies: readonly number[],
): RemoteBenchRow {
  const sorted = Float64Array.from(latencies).sort()
  return {
    phase,
    askedPerSec: counts.asked / seconds,
    answeredPerSec: counts.answered / seconds,
    admittedShare: counts.answered > 0 ? counts.admitted / counts.answered : 0,
    p50Ms: quantile(sorted, 0.5),
    p99Ms: quantile(sorted, 0.99),
    p999Ms: quantile(sorted, 0.999),
  }
}

/** One ask: answered at once (a boolean) or later. */
export type Asker = (key: string) => boolean | Promise<{ readonly admitted: boolean }>

/** What a paced run of asks got: its counts, every ask's latency, and the seconds it took. */
export interface PacedAsks {
  asked: number
  answered: number
  admitted: number
  readonly latencies: number[]
  seconds: number
}

/**
 * `perSec` asks a second in all, spread over the askers every 2 ms tick (each asker's asks of a
 * tick leave in one frame), for `measureMs`, then 200 ms for the last answers; latency ask to
 * answer (host monotonic time). In the bench's process, or in a gateway's (remote-gateway.ts).
 */
export async function pacedAsks(
  askers: readonly Asker[],
  perSec: number,
  measureMs: number,
  nextKey: () => string,
): Promise<PacedAsks> {
  const run: PacedAsks = { asked: 0, answered: 0, admitted: 0, latencies: [], seconds: 0 }
  const tickMs = 2
  const perTick = (perSec * tickMs) / 1000 / askers.length
  let owed = 0
  const startMs = hostMs()
  const untilMs = startMs + measureMs
  while (hostMs() < untilMs) {
    owed += perTick
    const n = Math.floor(owed)
    owed -= n
    for (const ask of askers)
      for (let i = 0; i < n; i++) {
        const at = hostMs()
        run.asked++
        const d = ask(nextKey())
        if (typeof d === 'boolean') {
          run.answered++
          if (d) run.admitted++
          run.latencies.push(0)
          continue
        }
        void d.then((a) => {
          run.answered++
          if (a.admitted) run.admitted++
          run.latencies.push(hostMs() - at)
        })
      }
    await sleep(tickMs)
  }
  await sleep(200)
  run.seconds = (hostMs() - startMs - 200) / 1000
  return run
}

/** The paced phase: `pacedPerSec` asks a second over the askers (`pacedAsks`), as a row. */
async function pacedPhase(
  askers: readonly Asker[],
  options: RemoteBenchOptions,
  nextKey: () => string,
): Promise<RemoteBenchRow> {
  const run = await pacedAsks(askers, options.pacedPerSec, options.measureMs, nextKey)
  return phaseRow(
    `paced, ${options.pacedPerSec.toLocaleString('en')} asks/s`,
    run.seconds,
    run,
    run.latencies,
  )
}

/**
 * The floor under the paced phase: the same asks, paced the same way over as many connections,
 * sent as `decide` frames by bare `ws` clients (each connection's asks of a tick in one frame, as
 * client/remote.ts sends them) to a server that only answers them
 * (bench/transport-floor.ts `ws-json`: the coordinator's `ws` options, a `JSON.parse` of each
 * frame, every ask admitted). What it measures is Node, `ws` and the kernel's loopback on this
 * machine, two processes, with no Sluice on either side: the least a remote decision's round trip
 * can take here.
 */
export async function benchRemoteFloor(options: RemoteBenchOptions): Promise<RemoteBenchRow> {
  const server = spawn(
    process.execPath,
    [join(findRoot(), 'dist/bench/transport-floor.js'), 'ws-json'],
    {
      stdio: ['ignore', 'pipe', 'inherit'],
    },
  )
  const sockets: WebSocket[] = []
  try {
    const port = await new Promise<number>((resolve, reject) => {
      server.once('exit', () => reject(new Error('transport floor exited')))
      server.stdout.once('data', (d: Buffer) => resolve(Number(/:(\d+)\//.exec(String(d))?.[1])))
    })
    for (let i = 0; i < options.processes; i++) {
      const socket = new WebSocket(`ws://127.0.0.1:${port}/v1/connect`)
      await new Promise<void>((resolve, reject) => {
        socket.once('open', () => resolve())
        socket.once('error', reject)
      })
      sockets.push(socket)
    }
    let next = 0
    const askers = sockets.map((socket): Asker => {
      const pending = new Map<number, (a: { admitted: boolean }) => void>()
      let queue: [number, string, number][] = []
      socket.on('message', (data: Buffer) => {
        const msg = JSON.parse(data.toString('utf8')) as { answers: [number, number][] }
        for (const [n, ok] of msg.answers) {
          pending.get(n)?.({ admitted: ok === 1 })
          pending.delete(n)
        }
      })
      return (key) => {
        const n = next++
        if (queue.length === 0)
          queueMicrotask(() => {
            socket.send(JSON.stringify({ type: 'decide', asks: queue }))
            queue = []
          })
        queue.push([n, `key/${key}`, 1])
        return new Promise((resolve) => pending.set(n, resolve))
      }
    })
    let seed = 12345
    const nextKey = (): string => {
      seed = (seed * 1103515245 + 12345) % 2147483648
      return `k${seed % options.keys}`
    }
    // A warm-up as long as the paced phase's own, unmeasured.
    await pacedPhase(askers, { ...options, measureMs: 3000 }, nextKey)
    const row = await pacedPhase(askers, options, nextKey)
    return { ...row, phase: `${row.phase}: transport floor (\`ws\`, no Sluice)` }
  } finally {
    for (const socket of sockets) socket.terminate()
    server.kill()
  }
}

/** The bench's coordinator config in a fresh directory: its path, and the directory. */
async function remoteConfig(options: RemoteBenchOptions): Promise<{ dir: string; path: string }> {
  const dir = await mkdtemp(join(tmpdir(), 'sluice-remote-'))
  const path = join(dir, 'sluice.json')
  await writeFile(
    path,
    JSON.stringify({
      server: { host: '127.0.0.1' },
      resources: [
        options.kind === 'quota'
          ? { match: 'key/*', keyed: true, kind: 'quota', capacity: 10_000, window: '1h' }
          : { match: 'key/*', keyed: true, kind: 'rate', capacity: 10_000, burst: 10_000 },
      ],
    }),
  )
  return { dir, path }
}

/**
 * The paced phase with each client in a process of its own (bench/remote-gateway.ts), as a
 * gateway fleet runs them: the in-process row's six clients share one event loop and one heap,
 * so each ask's latency there also holds the other five's reports (of up to 10,000 keys each)
 * and their collections. Latency is still ask to answer, host monotonic time, at the gateway.
 */
export async function benchRemoteApart(options: RemoteBenchOptions): Promise<RemoteBenchRow> {
  const { dir, path } = await remoteConfig(options)
  const coordinator = new CoordinatorProcess(path, await freePort())
  try {
    await coordinator.start()
    const warmMs = 3000
    const outputs = await Promise.all(
      Array.from({ length: options.processes }, (_, i) => {
        const child = spawn(
          process.execPath,
          [
            join(findRoot(), 'dist/bench/remote-gateway.js'),
            ...[
              coordinator.port,
              i,
              options.keys,
              options.pacedPerSec / options.processes,
              warmMs,
              options.measureMs,
            ].map(String),
          ],
          { stdio: ['ignore', 'pipe', 'inherit'] },
        )
        let out = ''
        child.stdout.on('data', (d: Buffer) => (out += String(d)))
        return new Promise<string>((resolve, reject) =>
          child.once('exit', (code) =>
            code === 0 ? resolve(out) : reject(new Error(`remote gateway ${i} exited ${code}`)),
          ),
        )
      }),
    )
    const counts = { asked: 0, answered: 0, admitted: 0 }
    const latencies: number[] = []
    for (const out of outputs) {
      const r = JSON.parse(out) as typeof counts & { latencies: number[] }
      counts.asked += r.asked
      counts.answered += r.answered
      counts.admitted += r.admitted
      for (const l of r.latencies) latencies.push(l)
    }
    return phaseRow(
      `paced, ${options.pacedPerSec.toLocaleString('en')} asks/s: one gateway per process`,
      (options.measureMs + 200) / 1000,
      counts,
      latencies,
    )
  } finally {
    await coordinator.stop()
    await rm(dir, { recursive: true, force: true })
  }
}

export async function benchRemote(options: RemoteBenchOptions): Promise<RemoteBenchRow[]> {
  const { dir, path: configPath } = await remoteConfig(options)
  const coordinator = new CoordinatorProcess(configPath, await freePort())
  const clients: SluiceClient[] = []
  const families: KeyedFamily[] = []
  try {
    await coordinator.start()
    for (let i = 0; i < options.processes; i++) {
      const client = createClient({
        url: `ws://127.0.0.1:${coordinator.port}/v1/connect`,
        clientId: `remote-${i}`,
      })
      client.on('error', () => undefined)
      clients.push(client)
      families.push(client.keyed('key'))
    }
    await Promise.all(families.map((f) => f.ready({ timeoutMs: 10_000 })))
    let seed = 12345
    const nextKey = (): string => {
      seed = (seed * 1103515245 + 12345) % 2147483648
      return `k${seed % options.keys}`
    }
    // Warm-up: every process says it decides remotely; the family turns crowded at a round.
    const warmUntil = hostMs() + 3000
    while (hostMs() < warmUntil) {
      for (const f of families) for (let i = 0; i < 5; i++) void f.decide(nextKey())
      await sleep(5)
    }
    const rows: RemoteBenchRow[] = []

    // Paced: the total rate spread over the clients, each tick.
    rows.push(
      await pacedPhase(
        families.map((f) => (key) => f.decide(key)),
        options,
        nextKey,
      ),
    )

    // Saturated: each client keeps `window` asks in flight.
    {
      const latencies: number[] = []
      let asked = 0
      let answered = 0
      let admitted = 0
      let stop = false
      const startMs = hostMs()
      const loop = async (f: KeyedFamily): Promise<void> => {
        while (!stop) {
          const at = hostMs()
          asked++
          const d = f.decide(nextKey())
          const a = typeof d === 'boolean' ? { admitted: d } : await d
          answered++
          if (a.admitted) admitted++
          latencies.push(hostMs() - at)
          // A refusal for too many in flight comes at once: yield so the loop cannot spin.
          if (typeof d === 'boolean') await sleep(0)
        }
      }
      const loops = families.flatMap((f) => Array.from({ length: options.window }, () => loop(f)))
      await sleep(options.measureMs)
      stop = true
      const seconds = (hostMs() - startMs) / 1000
      await Promise.all(loops)
      rows.push(
        phaseRow(
          `saturated, ${options.window} in flight per process`,
          seconds,
          { asked, answered, admitted },
          latencies,
        ),
      )
    }
    return rows
  } finally {
    await Promise.all(clients.map((c) => c.close().catch(() => undefined)))
    await coordinator.stop()
    await rm(dir, { recursive: true, force: true })
  }
}

export function remoteRow(r: RemoteBenchRow, processes: number): string {
  const ms = (x: number): string => x.toFixed(2)
  return `| ${r.phase} | ${processes} | ${Math.round(r.askedPerSec).toLocaleString('en')} | ${Math.round(r.answeredPerSec).toLocaleString('en')} | ${(100 * r.admittedShare).toFixed(1)}% | ${ms(r.p50Ms)} | ${ms(r.p99Ms)} | ${ms(r.p999Ms)} |`
}
