import { mkdtemp, rm, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { CoordinatorProcess, freePort, sleep } from './harness.js'
import type { QuotaWorkerSpec } from './quota-worker.js'
import { startWorker, type WorkerProcess } from './workers.js'

/**
 * The quota fault scenario: a quota of `capacity` units per `windowMs` window (aligned to the
 * epoch), `processes` client processes each asking `ratePerSec` (together well above the
 * budget), for `windows` whole windows. In the first window the coordinator is SIGKILLed
 * `coordinatorKillMs` in and restarted `restartAfterMs` later (same data directory), and
 * process 1 is SIGKILLed `clientKillMs` in and a new process takes its id `restartAfterMs`
 * later; the windows after it are left alone.
 */
export interface QuotaScenario {
  readonly processes: number
  readonly ratePerSec: number
  readonly capacity: number
  readonly windowMs: number
  readonly windows: number
  readonly refreshMs: number
  readonly coordinatorKillMs: number
  readonly clientKillMs: number
  readonly restartAfterMs: number
}

export const quotaScenario: QuotaScenario = {
  processes: 3,
  // 300/s asked in all against 3,000 a 20 s window: twice the budget, spent about 10 s in (the
  // issue's 3,000 a minute at 300/s, with the minute shortened to keep the run short).
  ratePerSec: 100,
  capacity: 3000,
  windowMs: 20_000,
  windows: 2,
  refreshMs: 250,
  coordinatorKillMs: 3000,
  clientKillMs: 6000,
  restartAfterMs: 500,
}

export interface QuotaWindowResult {
  /** The window's number (ms since the epoch ÷ its length). */
  readonly index: number
  /** Units admitted in it, by every process (from their logs). */
  readonly used: number
  /** Units asked for in it. */
  readonly asked: number
  /** What happened in it. */
  readonly fault: string
}

export interface QuotaResult {
  readonly capacity: number
  readonly windows: readonly QuotaWindowResult[]
}

/** Runs the quota scenario with real processes; counts what the client processes logged. */
export async function runQuotaScenario(s: QuotaScenario = quotaScenario): Promise<QuotaResult> {
  const dir = await mkdtemp(join(tmpdir(), 'sluice-quota-'))
  const configPath = join(dir, 'sluice.json')
  await writeFile(
    configPath,
    JSON.stringify({
      server: { host: '127.0.0.1', limits: { heartbeatMs: 1000, roundDebounceMs: 20 } },
      resources: [
        {
          match: 'mail',
          kind: 'quota',
          capacity: s.capacity,
          window: `${s.windowMs / 1000}s`,
          refreshMs: s.refreshMs,
          graceMs: 200,
          demand: { estimator: 'max', window: 4 },
        },
      ],
    }),
  )
  const coordinator = new CoordinatorProcess(configPath, await freePort())
  const workers: WorkerProcess[] = []
  try {
    await coordinator.start()
    // The first window opens at least 3 s from now: time for the processes to start and connect.
    const firstMs = Math.ceil((Date.now() + 3000) / s.windowMs) * s.windowMs
    const untilMs = firstMs + s.windows * s.windowMs - 100
    const spawnWorker = (i: number, fromWallMs: number): void => {
      const spec: QuotaWorkerSpec = {
        url: `ws://127.0.0.1:${coordinator.port}/v1/connect`,
        clientId: `q-${i}`,
        resource: 'mail',
        fromWallMs,
        untilWallMs: untilMs,
        tickMs: 10,
        ratePerSec: s.ratePerSec,
      }
      workers.push(startWorker('quota-worker', spec))
    }
    for (let i = 0; i < s.processes; i++) spawnWorker(i, firstMs)
    const at = async (wallMs: number): Promise<void> => sleep(wallMs - Date.now())
    await at(firstMs + s.coordinatorKillMs)
    await coordinator.stop()
    await at(firstMs + s.coordinatorKillMs + s.restartAfterMs)
    await coordinator.start()
    await at(firstMs + s.clientKillMs)
    const victim = workers[1]!
    victim.child.kill('SIGKILL')
    await victim.exited
    await at(firstMs + s.clientKillMs + s.restartAfterMs)
    spawnWorker(1, 0)
    await Promise.race([Promise.all(workers.map((w) => w.exited)), at(untilMs + 15_000)])
    const keep = process.env.SLUICE_FAULTS_KEEP
    if (keep !== undefined) {
      for (const [i, w] of workers.entries()) await writeFile(join(keep, `q-${i}.log`), w.output)
      await writeFile(join(keep, 'coordinator.log'), coordinator.log)
    }
    const faults = [
      `coordinator SIGKILLed ${s.coordinatorKillMs / 1000} s in, restarted ${s.restartAfterMs / 1000} s later; a client SIGKILLed ${s.clientKillMs / 1000} s in, a new process under its id ${s.restartAfterMs / 1000} s later`,
    ]
    return measureQuota(
      s,
      workers.map((w) => w.output),
      firstMs,
      faults,
    )
  } finally {
    for (const w of workers) if (w.child.exitCode === null) w.child.kill('SIGKILL')
    await coordinator.stop()
    await rm(dir, { recursive: true, force: true })
  }
}

/** Units admitted and asked for in each whole window the scenario ran, from the workers' logs. */
export function measureQuota(
  s: QuotaScenario,
  outputs: readonly string[],
  firstMs: number,
  faults: readonly string[],
): QuotaResult {
  const first = firstMs / s.windowMs
  const used = new Array<number>(s.windows).fill(0)
  const asked = new Array<number>(s.windows).fill(0)
  for (const output of outputs)
    for (const line of output.split('\n')) {
      if (line === '') continue
      const r = JSON.parse(line) as { w?: number; admitted?: number; refused?: number }
      if (r.w === undefined || r.admitted === undefined) continue
      const i = Math.floor(r.w / s.windowMs) - first
      // Admissions outside the scenario's windows (a tick before the first): counted nowhere.
      if (i < 0 || i >= s.windows) continue
      used[i]! += r.admitted
      asked[i]! += r.admitted + (r.refused ?? 0)
    }
  return {
    capacity: s.capacity,
    windows: used.map((u, i) => ({
      index: first + i,
      used: u,
      asked: asked[i]!,
      fault: faults[i] ?? 'none',
    })),
  }
}
