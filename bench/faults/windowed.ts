import { mkdtemp, rm, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { CoordinatorProcess, freePort, sleep } from './harness.js'
import { startWorker, type WorkerProcess } from './workers.js'

/** The faults a quota scenario (named or keyed) puts in its first window. */
export interface WindowedFaults {
  readonly processes: number
  readonly windowMs: number
  readonly windows: number
  /** The coordinator SIGKILLed this far into the first window, restarted `restartAfterMs` later. */
  readonly coordinatorKillMs: number
  /** Process 1 SIGKILLed this far in, a new process under its id `restartAfterMs` later. */
  readonly clientKillMs: number
  readonly restartAfterMs: number
}

/** What a windowed run leaves to measure: each worker's log, and when its first window opened. */
export interface WindowedRun {
  readonly outputs: readonly string[]
  readonly firstMs: number
  /** What happened in each window (those past the list: nothing). */
  readonly faults: readonly string[]
}

/** A worker's spec, given its number, the coordinator's URL and the wall-clock times it asks in. */
export type WorkerSpecOf = (
  i: number,
  url: string,
  fromWallMs: number,
  untilWallMs: number,
  started: number,
) => unknown

/**
 * Runs one coordinator process on `template` and `s.processes` worker processes of `script`
 * for `s.windows` whole windows (aligned to the epoch, the first at least 3 s away: time to
 * start and connect), with the faults of `s` in the first window. With SLUICE_FAULTS_KEEP=DIR
 * the logs are kept there (`<name>-<i>.log`, coordinator.log).
 */
export async function runWindowedFaults(
  s: WindowedFaults,
  name: string,
  template: Readonly<Record<string, unknown>>,
  script: string,
  specOf: WorkerSpecOf,
): Promise<WindowedRun> {
  const dir = await mkdtemp(join(tmpdir(), `sluice-${name}-`))
  const configPath = join(dir, 'sluice.json')
  await writeFile(
    configPath,
    JSON.stringify({
      server: { host: '127.0.0.1', limits: { heartbeatMs: 1000, roundDebounceMs: 20 } },
      resources: [template],
    }),
  )
  const coordinator = new CoordinatorProcess(configPath, await freePort())
  const workers: WorkerProcess[] = []
  try {
    await coordinator.start()
    const firstMs = Math.ceil((Date.now() + 3000) / s.windowMs) * s.windowMs
    const untilMs = firstMs + s.windows * s.windowMs - 100
    const url = `ws://127.0.0.1:${coordinator.port}/v1/connect`
    const spawnWorker = (i: number, fromWallMs: number): void => {
      workers.push(startWorker(script, specOf(i, url, fromWallMs, untilMs, workers.length)))
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
      for (const [i, w] of workers.entries())
        await writeFile(join(keep, `${name}-${i}.log`), w.output)
      await writeFile(join(keep, 'coordinator.log'), coordinator.log)
    }
    return {
      outputs: workers.map((w) => w.output),
      firstMs,
      faults: [
        `coordinator SIGKILLed ${s.coordinatorKillMs / 1000} s in, restarted ${s.restartAfterMs / 1000} s later; a client SIGKILLed ${s.clientKillMs / 1000} s in, a new process under its id ${s.restartAfterMs / 1000} s later`,
      ],
    }
  } finally {
    for (const w of workers) if (w.child.exitCode === null) w.child.kill('SIGKILL')
    await coordinator.stop()
    await rm(dir, { recursive: true, force: true })
  }
}
