import { spawn, type ChildProcess } from 'node:child_process'
import { existsSync } from 'node:fs'
import { mkdtemp, rm, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { CoordinatorProcess, freePort, sleep } from './harness.js'
import { hostMs } from './host-time.js'
import type { KeyedWorkerSpec } from './keyed-worker.js'
import { excessOverBound, type Admission } from './measure.js'
import { TcpProxy } from './proxy.js'

/**
 * The keyed fault scenario: a family `key/*` of `capacity`/s per key, `processes` client
 * processes each asking `ratePerSec` over `keys` keys by Zipf(`zipfS`), each behind its own
 * TCP proxy; process 0 cut from `cutAtMs` for `cutForMs`; the coordinator SIGKILLed at
 * `killAtMs` and restarted `restartAfterMs` later (same data directory).
 */
export interface KeyedScenario {
  readonly processes: number
  readonly keys: number
  readonly zipfS: number
  readonly ratePerSec: number
  readonly capacity: number
  readonly durationMs: number
  readonly cutAtMs: number
  readonly cutForMs: number
  readonly killAtMs: number
  readonly restartAfterMs: number
  /** The hot keys' share is measured over [from, to) ms, a window the faults have settled in. */
  readonly steadyFromMs: number
  readonly steadyToMs: number
  /** First checks are counted from this long after the start (see KeyedResult.firstAdmitted). */
  readonly warmMs: number
  /**
   * The processes check through `decide` (as `check` and the HTTP edge do): the coordinator
   * decides where a process's part cannot, and for every process of a crowded family.
   */
  readonly remote?: boolean
}

export const keyedScenario: KeyedScenario = {
  processes: 4,
  keys: 10_000,
  zipfS: 1.1,
  ratePerSec: 2000,
  capacity: 20,
  durationMs: 30_000,
  // Cut for 20 s (the issue asks for 15 s at least): the coordinator must hold what the cut
  // process may still enforce for ~13 s of it (below), and the hot keys' share is measured over
  // the rest.
  cutAtMs: 4000,
  cutForMs: 20_000,
  killAtMs: 8000,
  restartAfterMs: 500,
  // From when what the cut process may enforce has surely run out, to when it comes back. The
  // coordinator goes on renewing its leases into the cut until its heartbeat finds the
  // connection dead (up to 2 heartbeats, 2 s), and each such lease counts (it may have been
  // received) for its life: 6 s, grace 0.5 s, safe hold 3 s; the restore after the SIGKILL
  // adds the downtime (0.5 s, and a process start: 1 s at most); then a round and the others'
  // new leases (a refresh period, 0.5 s). 4 + 2 + 9.5 + 1 + 0.5 = 17 s. Measured from 14 s
  // (the cut, lease life and nothing else) the hot keys' mean fell to 0.93 in 2 runs of 7:
  // the coordinator had sent the cut process a renewal 1.8 s into the cut, held until 15.3 s.
  steadyFromMs: 17_000,
  steadyToMs: 24_000,
  warmMs: 2000,
}

/**
 * The keyed scenario with a crowded family: 8 processes checking through `decide`, so a key's
 * burst split 8 ways is below a fifth of a token at each and the coordinator's part decides for
 * them (server/pool/shapes/default-holders.ts) and holds the hot keys they ask for
 * (shapes/hot-key.ts). The same faults; the same 8,000 requests/s in all as 4 × 2,000.
 */
export const crowdedKeyedScenario: KeyedScenario = {
  ...keyedScenario,
  processes: 8,
  ratePerSec: 1000,
  remote: true,
}

export interface KeyedResult {
  /** Keys asked for at least once. */
  readonly keysSeen: number
  /**
   * The most any key was admitted beyond capacity·t + burst, over any interval (≤ 0: held); with
   * remote decisions, beyond that and what the key earns in its slowest round trip (a remote
   * admission is logged when its answer comes, up to that long after the coordinator took it).
   */
  readonly worstExcess: number
  /** The key that came closest to (or went over) its bound. */
  readonly worstKey: string
  /** Keys whose admissions went over their bound. */
  readonly keysOver: number
  /** Of the 20 most asked-for keys, the lowest admitted ÷ min(capacity, demand) over the steady window. */
  readonly hotShareMin: number
  /** The same, their mean. */
  readonly hotShareMean: number
  /**
   * Each process's first check of a key: the share admitted, from `warmMs` after the start and a
   * second after the process's own first check, whichever is later (a process's new keys hold
   * what its share has earned since it rose: the first second is the ramp; 8 processes spawned
   * on 2 cores made their first checks 2.3 s after the start, and the ramp counted), process 0's while it is cut off and until it is back left out (a partitioned process
   * enforces nothing new by design); with remote decisions, every process's from the
   * coordinator's SIGKILL until 2 s after it is connected again, and until `steadyFromMs` at
   * least, too (nobody decides meanwhile, then the restarted part recovers).
   */
  readonly firstAdmitted: number
  readonly firstChecks: number
  /** The first checks left out of firstAdmitted (the start's ramp, the cut process), and their share admitted. */
  readonly rampAdmitted: number
  readonly rampChecks: number
  /** Requests admitted and refused, in all. */
  readonly admitted: number
  readonly refused: number
  /** Checks the coordinator decided (remote), and the slowest answer of one it admitted (ms). */
  readonly remoteChecks: number
  readonly remoteLatencyMaxMs: number
  /** How long the restarted coordinator took to answer `/healthz` (runKeyedScenario only). */
  readonly restartTookMs?: number
  /** Where the steady window opened: `steadyFromMs`, later by a restart slower than 1 s. */
  readonly steadyFromMs?: number
}

function findRoot(): string {
  let dir = dirname(fileURLToPath(import.meta.url))
  while (!existsSync(join(dir, 'package.json')) && dirname(dir) !== dir) dir = dirname(dir)
  return dir
}

/** Runs the keyed scenario with real processes; measures from what the client processes logged. */
export async function runKeyedScenario(s: KeyedScenario = keyedScenario): Promise<KeyedResult> {
  const root = findRoot()
  const dir = await mkdtemp(join(tmpdir(), 'sluice-keyed-'))
  const configPath = join(dir, 'sluice.json')
  await writeFile(
    configPath,
    JSON.stringify({
      server: { host: '127.0.0.1', limits: { heartbeatMs: 1000, roundDebounceMs: 20 } },
      resources: [
        {
          match: 'key/*',
          keyed: true,
          kind: 'rate',
          capacity: s.capacity,
          // Lease times nearer the defaults than the other fault scenarios': a restart that takes
          // a few seconds (process start, ledger load, reconnect backoff) is ridden out on leases.
          leaseTtlMs: 6000,
          refreshMs: 500,
          graceMs: 500,
          safeHoldMs: 3000,
          demand: { estimator: 'max', window: 8 },
        },
      ],
    }),
  )
  const coordinator = new CoordinatorProcess(configPath, await freePort())
  const workers: { child: ChildProcess; proxy: TcpProxy; output: string; exited: Promise<void> }[] =
    []
  try {
    await coordinator.start()
    for (let i = 0; i < s.processes; i++) {
      const proxy = await TcpProxy.start(coordinator.port)
      const spec: KeyedWorkerSpec = {
        url: `ws://127.0.0.1:${proxy.port}/v1/connect`,
        clientId: `kp-${i}`,
        durationMs: s.durationMs,
        tickMs: 10,
        prefix: 'key',
        keys: s.keys,
        zipfS: s.zipfS,
        ratePerSec: s.ratePerSec,
        seed: 1000 + i,
        ...(s.remote === true ? { remote: true } : {}),
      }
      const child = spawn(
        process.execPath,
        [join(root, 'dist/bench/faults/keyed-worker.js'), JSON.stringify(spec)],
        { stdio: ['ignore', 'pipe', 'inherit'] },
      )
      const worker = {
        child,
        proxy,
        output: '',
        exited: new Promise<void>((resolve) => child.once('exit', () => resolve())),
      }
      child.stdout.on('data', (d: Buffer) => (worker.output += d.toString()))
      workers.push(worker)
    }
    const t0 = hostMs()
    let restartTookMs = 0
    const actions: { atMs: number; run: () => Promise<void> | void }[] = [
      { atMs: s.cutAtMs, run: () => workers[0]!.proxy.set('cut') },
      { atMs: s.killAtMs, run: () => coordinator.stop() },
      {
        atMs: s.killAtMs + s.restartAfterMs,
        run: async () => {
          const startedMs = hostMs()
          await coordinator.start()
          restartTookMs = hostMs() - startedMs
        },
      },
      { atMs: s.cutAtMs + s.cutForMs, run: () => workers[0]!.proxy.set('open') },
    ]
    actions.sort((a, b) => a.atMs - b.atMs)
    for (const a of actions) {
      await sleep(t0 + a.atMs - hostMs())
      await a.run()
    }
    await Promise.race([Promise.all(workers.map((w) => w.exited)), sleep(s.durationMs + 15_000)])
    // For a look afterwards: SLUICE_FAULTS_KEEP=DIR keeps each worker's log and the coordinator's.
    const keep = process.env.SLUICE_FAULTS_KEEP
    if (keep !== undefined) {
      for (const [i, w] of workers.entries()) await writeFile(join(keep, `kp-${i}.log`), w.output)
      await writeFile(join(keep, 'coordinator.log'), `t0 ${t0}\n${coordinator.log}`)
    }
    // The steady window opens once what the cut process may enforce has surely run out, reckoned
    // with a restart of 1 s at most (keyedScenario): a restore holds each lease on for the whole
    // downtime, so a slower start moves it later. Measured 1.5 s here (a 2.2 MB ledger), and a
    // loaded CI run once found the hot keys' mean 0.91 from 17 s.
    const steadyFromMs = s.steadyFromMs + Math.max(0, restartTookMs - 1000)
    return {
      ...measureKeyed(
        { ...s, steadyFromMs },
        workers.map((w) => w.output),
        t0,
      ),
      restartTookMs,
      steadyFromMs,
    }
  } finally {
    for (const w of workers) {
      if (w.child.exitCode === null) w.child.kill('SIGKILL')
      await w.proxy.close()
    }
    await coordinator.stop()
    await rm(dir, { recursive: true, force: true })
  }
}

/**
 * A worker's log lines, a last one without its newline left out: a worker still writing when
 * the run ends (one that had not stopped 15 s after its time, on a loaded machine) leaves half a
 * line, which failed the whole measurement (a JSON error).
 */
function completeLines(output: string): string[] {
  return output.slice(0, output.lastIndexOf('\n') + 1).split('\n')
}

/** The measures of the keyed scenario, from the workers' logs alone. */
export function measureKeyed(
  s: KeyedScenario,
  outputs: readonly string[],
  t0: number,
): KeyedResult {
  const admissions = new Map<number, Admission[]>()
  const asked = new Map<number, number>()
  const steadyAdmitted = new Map<number, number>()
  const steadyAsked = new Map<number, number>()
  let firstChecks = 0
  let firstAdmitted = 0
  let rampChecks = 0
  let rampAdmitted = 0
  let admitted = 0
  let refused = 0
  const from = t0 + s.steadyFromMs
  const to = t0 + s.steadyToMs
  const warm = outputs.map((output) => {
    for (const line of completeLines(output))
      if (line.includes('"first":'))
        return Math.max(t0 + s.warmMs, (JSON.parse(line) as { t: number }).t + 1000)
    return t0 + s.warmMs
  })
  const cutFrom = t0 + s.cutAtMs
  const cutTo = t0 + s.cutAtMs + s.cutForMs + 2000
  // Checks through `decide` ask the coordinator: from its SIGKILL until it is whole again, a
  // first check it would decide is refused there (no connection, then the restarted
  // coordinator's part of the family not leased yet, its new keys young): until 2 s after the
  // process is connected again, and at least until the steady window opens (moved by a slow
  // restart), from where the hot keys' share measures the recovery. Until 2 s after the
  // reconnect only, a CI run measured 0.899 (once; 0.996-0.9998 here): the part held nothing
  // for seconds after the processes came back (the family flipping crowded and back, mended
  // in 0f12332: docs/benchmarks.md).
  const downFrom = t0 + s.killAtMs
  const downTo = outputs.map((output) => {
    for (const line of completeLines(output)) {
      if (!line.includes('"connected":true')) continue
      const r = JSON.parse(line) as { t: number }
      if (r.t > downFrom) return Math.max(r.t + 2000, t0 + s.steadyFromMs)
    }
    return Infinity
  })
  let remoteChecks = 0
  let remoteLatencyMaxMs = 0
  /** The slowest round trip (from its last send) of a remote admission, by key. */
  const latencyOf = new Map<number, number>()
  for (const [i, output] of outputs.entries())
    for (const line of completeLines(output)) {
      if (line === '') continue
      const r = JSON.parse(line) as {
        t: number
        a?: Record<string, number>
        r?: Record<string, number>
        first?: number
        ok?: boolean
        lat?: number
        rt?: number
      }
      if (r.first !== undefined) {
        if (
          r.t < warm[i]! ||
          (i === 0 && r.t >= cutFrom && r.t < cutTo) ||
          (s.remote === true && r.t >= downFrom && r.t < downTo[i]!)
        ) {
          rampChecks++
          if (r.ok === true) rampAdmitted++
          continue
        }
        firstChecks++
        if (r.ok === true) firstAdmitted++
        continue
      }
      const steady = r.t >= from && r.t < to
      if (r.lat !== undefined) {
        remoteChecks++
        if (r.a !== undefined) {
          remoteLatencyMaxMs = Math.max(remoteLatencyMaxMs, r.lat)
          // The bound's slack: from the answer's last send (the coordinator took it within).
          for (const k of Object.keys(r.a))
            latencyOf.set(Number(k), Math.max(latencyOf.get(Number(k)) ?? 0, r.rt ?? r.lat))
        }
      }
      for (const [k, n] of Object.entries(r.a ?? {})) {
        const key = Number(k)
        admitted += n
        let list = admissions.get(key)
        if (list === undefined) admissions.set(key, (list = []))
        list.push({ t: r.t, n })
        asked.set(key, (asked.get(key) ?? 0) + n)
        if (steady) {
          steadyAdmitted.set(key, (steadyAdmitted.get(key) ?? 0) + n)
          steadyAsked.set(key, (steadyAsked.get(key) ?? 0) + n)
        }
      }
      for (const [k, n] of Object.entries(r.r ?? {})) {
        const key = Number(k)
        refused += n
        asked.set(key, (asked.get(key) ?? 0) + n)
        if (steady) steadyAsked.set(key, (steadyAsked.get(key) ?? 0) + n)
      }
    }
  let worstExcess = -Infinity
  let worstKey = ''
  let keysOver = 0
  for (const [key, list] of admissions) {
    // Burst: one second of capacity (the family's default). A remote admission is logged when
    // its answer came, up to the key's slowest round trip after the coordinator took it (from
    // the ask's last send: a wait for a connection before it is not in it): the bound is checked
    // with what the key earns in that time added.
    const slack = (s.capacity * (latencyOf.get(key) ?? 0)) / 1000
    const excess =
      excessOverBound(list, [{ fromMs: t0 - 60_000, capacity: s.capacity }], s.capacity) - slack
    if (excess > 0) keysOver++
    if (excess > worstExcess) {
      worstExcess = excess
      worstKey = `k${key}`
    }
  }
  const hottest = [...asked.entries()].sort((a, b) => b[1] - a[1]).slice(0, 20)
  const seconds = (s.steadyToMs - s.steadyFromMs) / 1000
  const shares = hottest.map(([key]) => {
    const demand = (steadyAsked.get(key) ?? 0) / seconds
    const got = (steadyAdmitted.get(key) ?? 0) / seconds
    const due = Math.min(s.capacity, demand)
    return due > 0 ? got / due : 1
  })
  return {
    keysSeen: asked.size,
    worstExcess,
    worstKey,
    keysOver,
    hotShareMin: Math.min(...shares),
    hotShareMean: shares.reduce((a, b) => a + b, 0) / Math.max(1, shares.length),
    firstAdmitted: firstChecks > 0 ? firstAdmitted / firstChecks : 1,
    firstChecks,
    rampAdmitted: rampChecks > 0 ? rampAdmitted / rampChecks : 1,
    rampChecks,
    admitted,
    refused,
    remoteChecks,
    remoteLatencyMaxMs,
  }
}
