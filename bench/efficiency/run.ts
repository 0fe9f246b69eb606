import { spawn, type ChildProcess } from 'node:child_process'
import { mkdtemp, rm, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { CoordinatorProcess, freePort, sleep } from '../faults/harness.js'
import { hostMs } from '../faults/host-time.js'
import { excessOverBound, type Admission } from '../faults/measure.js'
import { findRoot } from '../faults/workers.js'
import {
  compare,
  replayCentral,
  type CentralLimit,
  type Comparison,
  type TraceEvent,
} from './central.js'
import type { EfficiencyScenario } from './scenarios.js'
import { rankBand, splitLosses, type SplitRow } from './split.js'
import type { EfficiencyWorkerSpec } from './worker.js'

/** What one scenario measured: Sluice against one exact central limiter on the same trace. */
export interface EfficiencyResult extends Comparison {
  readonly name: string
  /** Keys Sluice admitted past their bound: capacity·t + burst (rate), the budget of a window (quota). */
  readonly keysOver: number
  /** First checks of a key at a gateway, and the share admitted: all, and at a gateway under 5 s old. */
  readonly firstChecks: number
  readonly firstAdmitted: number
  readonly youngChecks: number
  readonly youngAdmitted: number
  /**
   * The same judged against the central limiter: of the first checks it would admit too (a
   * refusal whose key the central limiter refused as well at that tick does not count), the
   * share Sluice admitted.
   */
  readonly firstFair: { readonly checks: number; readonly admitted: number }
  readonly youngFair: { readonly checks: number; readonly admitted: number }
  /**
   * First checks at a young gateway of keys within their limit then: the central limiter
   * refused no check of the key within `atLimitMs` of it. At a key at its limit, the central
   * limiter too admits some of the checks arriving together and refuses the others, and which
   * of them is a matter of arrival order (a check asked of the coordinator is taken there a
   * round trip later): Sluice admitting as many but others is no loss, and the judge above still
   * counts it as one.
   */
  readonly youngWithin: { readonly checks: number; readonly admitted: number }
  /** The customer's probe (a new key asked `asked` times), when the scenario has one. */
  readonly probe: { readonly asked: number; readonly admitted: number } | undefined
  /**
   * Remote decisions (scenarios with `remote`): checks asked of the coordinator, and the
   * added latency of their answers, ask to answer (ms; the processes' medians' median, and
   * the largest p99).
   */
  readonly remote:
    { readonly asked: number; readonly p50Ms: number; readonly p99Ms: number } | undefined
  /**
   * With `BENCH_SPLIT=1`: where the checks the central limiter admitted and Sluice refused are,
   * by key rank, by 5 s since the first check (`BENCH_SPLIT_STEP_MS`), by process (and by
   * process and rank with `BENCH_SPLIT_CROSS=1`), and (a quota)
   * by 250 ms of the window.
   */
  readonly split?: readonly SplitRow[]
}

interface Worker {
  readonly child: ChildProcess
  output: string
  readonly exited: Promise<void>
}

/** Within this of a check the central limiter refused, a key counts as at its limit (`youngWithin`). */
const atLimitMs = 100

/** A gateway this young counts as just joined. */
const youngMs = 5000

/**
 * Runs `s` with real processes on loopback: one coordinator (`sluice serve`,
 * its file ledger in a temporary directory) and the scenario's gateway
 * processes; then merges every check they logged into one trace and replays
 * it through one exact central limiter.
 */
export async function runEfficiency(s: EfficiencyScenario): Promise<EfficiencyResult> {
  const root = findRoot()
  const dir = await mkdtemp(join(tmpdir(), 'sluice-efficiency-'))
  const configPath = join(dir, 'sluice.json')
  // A keyed family `key/*`, or (named) a template each `key/<k>` is a named resource of.
  const keyed = s.named === true ? {} : { keyed: true }
  const template =
    s.kind === 'rate'
      ? {
          match: 'key/*',
          ...keyed,
          kind: 'rate',
          capacity: s.capacity,
          burst: s.burst,
          ...s.settings,
        }
      : {
          match: 'key/*',
          ...keyed,
          kind: 'quota',
          capacity: s.capacity,
          window: `${s.windowMs! / 1000}s`,
          ...s.settings,
        }
  await writeFile(
    configPath,
    JSON.stringify({ server: { host: '127.0.0.1' }, resources: [template] }),
  )
  const coordinator = new CoordinatorProcess(configPath, await freePort())
  const workers: Worker[] = []
  const startWallMs = Date.now()
  const untilWallMs = startWallMs + s.durationMs
  let started = 0
  /** Starts the process of slot `slot` (a replacement takes its predecessor's slot). */
  const spawnWorker = (slot: number): Worker => {
    const n = started++
    const spec: EfficiencyWorkerSpec = {
      url: `ws://127.0.0.1:${coordinator.port}/v1/connect`,
      clientIdBase: `gw-${n}`,
      gateways: s.gatewaysPerProcess,
      prefix: 'key',
      keys: s.keys,
      zipfS: 1.1,
      seed: 7000 + n,
      ratePerSec: s.ratePerSec / s.processes,
      tickMs: 10,
      untilWallMs,
      youngMs,
      ...(s.remote === true ? { remote: true } : {}),
      ...(s.named === true ? { named: true } : {}),
      ...(s.probe === undefined
        ? {}
        : {
            probe: {
              atWallMs: startWallMs + s.probe.atMs,
              key: 'customer',
              // The customer's requests split over the slots as a balancer would.
              count:
                Math.floor(s.probe.count / s.processes) +
                (slot < s.probe.count % s.processes ? 1 : 0),
              overMs: s.probe.overMs ?? 0,
            },
          }),
    }
    const child = spawn(
      process.execPath,
      [join(root, 'dist/bench/efficiency/worker.js'), JSON.stringify(spec)],
      { stdio: ['ignore', 'pipe', 'inherit'] },
    )
    const worker: Worker = {
      child,
      output: '',
      exited: new Promise<void>((resolve) => child.once('exit', () => resolve())),
    }
    child.stdout.on('data', (d: Buffer) => (worker.output += d.toString()))
    workers.push(worker)
    return worker
  }
  try {
    await coordinator.start()
    const live: Worker[] = []
    for (let i = 0; i < s.processes; i++) live.push(spawnWorker(i))
    const t0 = hostMs()
    const actions: { atMs: number; run: () => Promise<void> | void }[] = []
    if (s.deploy !== undefined)
      for (let i = 0; i < s.processes; i++)
        actions.push({
          atMs: s.deploy.firstAtMs + i * s.deploy.everyMs,
          run: () => {
            live[i]!.child.kill('SIGTERM')
            live[i] = spawnWorker(i)
          },
        })
    if (s.coordinatorKill !== undefined) {
      actions.push({ atMs: s.coordinatorKill.atMs, run: () => coordinator.stop() })
      actions.push({
        atMs: s.coordinatorKill.atMs + s.coordinatorKill.downMs,
        run: () => coordinator.start(),
      })
    }
    if (s.gatewayKill !== undefined)
      actions.push({
        atMs: s.gatewayKill.atMs,
        run: () => {
          live[0]!.child.kill('SIGKILL')
          live[0] = spawnWorker(0)
        },
      })
    if (s.scaleUp !== undefined)
      actions.push({ atMs: s.scaleUp.atMs, run: () => void live.push(spawnWorker(s.processes)) })
    actions.sort((a, b) => a.atMs - b.atMs)
    for (const a of actions) {
      await sleep(t0 + a.atMs - hostMs())
      await a.run()
    }
    await Promise.race([Promise.all(workers.map((w) => w.exited)), sleep(s.durationMs + 30_000)])
    const keep = process.env.SLUICE_BENCH_KEEP
    if (keep !== undefined) {
      for (const [i, w] of workers.entries()) await writeFile(join(keep, `gw-${i}.log`), w.output)
      await writeFile(join(keep, 'coordinator.log'), coordinator.log)
      // Its counters as the run left them (rounds, lease messages, acks), where it can be read.
      const res = await fetch(`http://127.0.0.1:${coordinator.port}/metrics`).catch(() => undefined)
      if (res !== undefined)
        await writeFile(join(keep, 'coordinator-metrics.txt'), await res.text())
    }
    return measure(
      s,
      workers.map((w) => w.output),
    )
  } finally {
    for (const w of workers) if (w.child.exitCode === null) w.child.kill('SIGKILL')
    await coordinator.stop()
    await rm(dir, { recursive: true, force: true })
  }
}

interface TickLine {
  /** When the checks were made (host monotonic ms, and wall ms). */
  t: number
  w: number
  /** Remote answers: how much after `t` they came (their admissions are bounded there). */
  dt?: number
  a?: Record<string, number>
  r?: Record<string, number>
  q?: Record<string, number>
  f?: [number, number]
  y?: [number, number]
  yr?: string[]
  fr?: string[]
  ya?: string[]
  probe?: string
  asked?: number
  admitted?: number
  /** A process's remote answers: ask to answer (p50, p99), how many, and p99 from their last send. */
  latency?: [p50: number, p99: number, asked: number, roundTripP99?: number]
}

/** The measures of a scenario, from the gateways' logs alone. */
export function measure(s: EfficiencyScenario, outputs: readonly string[]): EfficiencyResult {
  const trace: TraceEvent[] = []
  const admissions = new Map<string, Admission[]>()
  const byWindow = new Map<string, number>()
  let firstChecks = 0
  let firstAdmitted = 0
  let youngChecks = 0
  let youngAdmitted = 0
  let probe: { asked: number; admitted: number } | undefined
  const latencies: [number, number, number, number?][] = []
  /** The process (its slot in `outputs`) each event of the trace came from. */
  const processOf: number[] = []
  /** The trace event of each first check refused, at a young gateway or not. */
  const youngRefused: number[] = []
  const firstRefused: number[] = []
  /** The trace event of each first check admitted at a young gateway. */
  const youngAdmittedEvents: number[] = []
  for (const [p, output] of outputs.entries())
    for (const text of output.split('\n')) {
      if (text === '') continue
      const line = JSON.parse(text) as TickLine
      if (line.latency !== undefined) {
        latencies.push(line.latency)
        continue
      }
      if (line.probe !== undefined) {
        probe ??= { asked: 0, admitted: 0 }
        probe.asked += line.asked ?? 0
        probe.admitted += line.admitted ?? 0
        continue
      }
      if (line.a === undefined) continue
      const keys = new Set([...Object.keys(line.a), ...Object.keys(line.r ?? {})])
      const eventOf = new Map<string, number>()
      for (const key of keys) {
        eventOf.set(key, trace.length)
        const admitted = line.a[key] ?? 0
        trace.push({ t: line.t, w: line.w, key, asked: admitted + (line.r?.[key] ?? 0), admitted })
        processOf.push(p)
        if (admitted > 0) {
          let list = admissions.get(key)
          if (list === undefined) admissions.set(key, (list = []))
          list.push({ t: line.t + (line.dt ?? 0), n: admitted })
        }
      }
      for (const [id, n] of Object.entries(line.q ?? {}))
        byWindow.set(id, (byWindow.get(id) ?? 0) + n)
      for (const key of line.yr ?? []) youngRefused.push(eventOf.get(key)!)
      for (const key of line.fr ?? []) firstRefused.push(eventOf.get(key)!)
      for (const key of line.ya ?? []) youngAdmittedEvents.push(eventOf.get(key)!)
      firstChecks += line.f?.[0] ?? 0
      firstAdmitted += line.f?.[1] ?? 0
      youngChecks += line.y?.[0] ?? 0
      youngAdmitted += line.y?.[1] ?? 0
    }
  const limit: CentralLimit =
    s.kind === 'rate'
      ? { kind: 'rate', ratePerSec: s.capacity, burst: s.burst ?? s.capacity }
      : { kind: 'quota', budget: s.capacity, windowMs: s.windowMs! }
  let keysOver = 0
  const asked = latencies.reduce((n, l) => n + l[2], 0)
  const p50s = latencies
    .filter((l) => l[2] > 0)
    .map((l) => l[0])
    .sort((x, y) => x - y)
  const remote =
    s.remote === true
      ? {
          asked,
          p50Ms: p50s[Math.floor(p50s.length / 2)] ?? 0,
          p99Ms: Math.max(0, ...latencies.filter((l) => l[2] > 0).map((l) => l[1])),
        }
      : undefined
  if (s.kind === 'rate') {
    // A remote admission is logged when its answer came in, up to one round trip after the
    // coordinator took it (from its last send: a wait for a connection before it left is not in
    // it): the bound is checked with what a key earns in that time added (the largest p99 of
    // the run's round trips).
    const roundTripP99Ms = Math.max(
      0,
      ...latencies.filter((l) => l[2] > 0).map((l) => l[3] ?? l[1]),
    )
    const slack = remote === undefined ? 0 : (s.capacity * roundTripP99Ms) / 1000
    for (const list of admissions.values())
      if (
        excessOverBound(list, [{ fromMs: -1e15, capacity: s.capacity }], s.burst ?? s.capacity) >
        slack + 1e-6
      )
        keysOver++
  } else {
    // By the window of the budget each admission came from, as the coordinator counts it.
    const over = new Set<string>()
    for (const [id, n] of byWindow) if (n > s.capacity) over.add(id.slice(0, id.lastIndexOf('@')))
    keysOver = over.size
  }
  const central = replayCentral(trace, limit)
  // A refused first check counts against Sluice only if the central limiter admitted every check
  // of that key in that tick (else it would have refused one too: which one, the tick does not say).
  const judged = (checks: number, admitted: number, refused: readonly number[]) => {
    const both = refused.filter((i) => central[i]! < trace[i]!.asked).length
    return { checks: checks - both, admitted }
  }
  const atLimit = keyAtLimit(trace, central, atLimitMs)
  const youngAdmittedWithin = youngAdmittedEvents.filter((i) => !atLimit(i)).length
  const youngRefusedWithin = youngRefused.filter((i) => !atLimit(i)).length
  return {
    name: s.name,
    ...compare(trace, limit, central),
    ...(process.env.BENCH_SPLIT === '1'
      ? {
          split: efficiencySplit(
            s,
            trace,
            central,
            processOf,
            Number(process.env.BENCH_SPLIT_STEP_MS ?? 5000),
            process.env.BENCH_SPLIT_CROSS === '1',
          ),
        }
      : {}),
    keysOver,
    firstChecks,
    firstAdmitted: firstChecks > 0 ? firstAdmitted / firstChecks : 1,
    youngChecks,
    youngAdmitted: youngChecks > 0 ? youngAdmitted / youngChecks : 1,
    firstFair: judged(firstChecks, firstAdmitted, firstRefused),
    youngFair: judged(youngChecks, youngAdmitted, youngRefused),
    youngWithin: {
      checks: youngAdmittedWithin + youngRefusedWithin,
      admitted: youngAdmittedWithin,
    },
    probe,
    remote,
  }
}

/**
 * Whether the key of trace event `i` was at its limit then: the central limiter refused a check
 * of it within `withinMs` (before or after).
 */
export function keyAtLimit(
  trace: readonly TraceEvent[],
  central: readonly number[],
  withinMs: number,
): (i: number) => boolean {
  const refusedAt = new Map<string, number[]>()
  for (const [i, e] of trace.entries())
    if (central[i]! < e.asked) {
      let list = refusedAt.get(e.key)
      if (list === undefined) refusedAt.set(e.key, (list = []))
      list.push(e.t)
    }
  for (const list of refusedAt.values()) list.sort((x, y) => x - y)
  return (i) => {
    const e = trace[i]!
    const list = refusedAt.get(e.key)
    if (list === undefined) return false
    // The first refusal at or after t - withinMs: at limit if it is by t + withinMs.
    let lo = 0
    let hi = list.length
    while (lo < hi) {
      const mid = (lo + hi) >> 1
      if (list[mid]! < e.t - withinMs) lo = mid + 1
      else hi = mid
    }
    return lo < list.length && list[lo]! <= e.t + withinMs
  }
}

/** The groupings `BENCH_SPLIT=1` shows (`splitLosses`). */
export function efficiencySplit(
  s: EfficiencyScenario,
  trace: readonly TraceEvent[],
  central: readonly number[],
  processOf: readonly number[],
  stepMs = 5000,
  /** Each process's checks by key rank too (`BENCH_SPLIT_CROSS=1`): where a joiner falls short. */
  cross = false,
): SplitRow[] {
  let t0 = Infinity
  for (const e of trace) if (e.t < t0) t0 = e.t
  const windowMs = s.kind === 'quota' ? s.windowMs : undefined
  return splitLosses(trace, central, (e, i) => {
    const labels = [
      rankBand(e.key),
      `since the start: ${(Math.floor((e.t - t0) / stepMs) * (stepMs / 1000)).toFixed(stepMs % 1000 === 0 ? 0 : 2).padStart(6)} s`,
      `process ${processOf[i] ?? '?'}`,
    ]
    if (cross) labels.push(`process ${processOf[i] ?? '?'}, ${rankBand(e.key)}`)
    if (windowMs !== undefined)
      labels.push(`window at: ${String(Math.floor((e.w % windowMs) / 250) * 250).padStart(6)} ms`)
    return labels
  })
}

/** The split's lines under a scenario's row (`BENCH_SPLIT=1`). */
export function splitLines(r: EfficiencyResult): string[] {
  if (r.split === undefined) return []
  const pct = (x: number, of: number): string => `${((100 * x) / Math.max(1, of)).toFixed(1)}%`
  return r.split.map(
    (row) =>
      `    ${row.label.padEnd(28)} asked ${String(row.asked).padStart(6)}, Sluice ${String(row.admitted).padStart(6)}, central ${String(row.central).padStart(6)} (Sluice ÷ central ${pct(row.admitted, row.central)}), refused of central's ${row.lost}`,
  )
}

/** One scenario's row of the table `npm run bench -- efficiency` prints. */
export function efficiencyRow(r: EfficiencyResult): string {
  const pct = (x: number): string => `${(100 * x).toFixed(1)}%`
  // Of those the central limiter admitted too, when it refused some of them.
  const fair = (f: EfficiencyResult['firstFair'], all: number): string =>
    f.checks < all ? ` (${pct(f.admitted / Math.max(1, f.checks))} of ${f.checks} it admits)` : ''
  // Of the keys within their limit then, when some were not.
  const within = (x: EfficiencyResult): string =>
    x.youngWithin.checks < x.youngChecks
      ? `; ${pct(x.youngWithin.admitted / Math.max(1, x.youngWithin.checks))} of ${x.youngWithin.checks} at keys within their limit`
      : ''
  return [
    '',
    r.name,
    pct(r.ratio),
    `${r.centralOnly} of ${r.central} (${pct(r.centralOnly / Math.max(1, r.central))})`,
    String(r.keysOver),
    `${pct(r.firstAdmitted)} of ${r.firstChecks}${fair(r.firstFair, r.firstChecks)}`,
    r.youngChecks > 0
      ? `${pct(r.youngAdmitted)} of ${r.youngChecks}${fair(r.youngFair, r.youngChecks)}${within(r)}`
      : '—',
    r.probe === undefined ? '—' : `${r.probe.admitted} of ${r.probe.asked}`,
    r.remote === undefined
      ? '—'
      : `${r.remote.p50Ms.toFixed(2)} / ${r.remote.p99Ms.toFixed(2)} ms (${r.remote.asked} asked)`,
    '',
  ]
    .join(' | ')
    .trim()
}

export const efficiencyHeader = [
  '| scenario | Sluice ÷ central | admitted by central, refused by Sluice | keys over the bound | first checks admitted | at a gateway < 5 s old | the customer’s probe | remote decisions p50 / p99 |',
  '| --- | --- | --- | --- | --- | --- | --- | --- |',
]
