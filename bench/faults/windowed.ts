import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import {
  CoordinatorProcess,
  damaged,
  freePort,
  shortenedInLog,
  sleep,
  type LedgerDamage,
} from './harness.js'
import { parseLedger } from '../../server/ledger/file-format.js'
import { TcpProxy } from './proxy.js'
import { startWorker, type WorkerProcess } from './workers.js'

/** The faults a quota scenario (named or keyed) puts in its first window. */
export interface WindowedFaults {
  readonly processes: number
  readonly windowMs: number
  readonly windows: number
  /** The coordinator SIGKILLed this far into the first window, restarted `restartAfterMs` later. */
  readonly coordinatorKillMs?: number | undefined
  /** Process 1 SIGKILLed this far in, a new process under its id `restartAfterMs` later. */
  readonly clientKillMs?: number | undefined
  readonly restartAfterMs: number
  /**
   * Every client's link delayed this long each way (a TcpProxy per process, every chunk held):
   * a lease comes later than `windowGraceMs` covers.
   */
  readonly delayMs?: number | undefined
  /**
   * A slow disk under the coordinator, every start of it: each fdatasync `fsyncMs` longer
   * (strace-injected, harness.ts `withSlowFsync`), `server.ledgerMaxWriteMs` set to
   * `ledgerMaxWriteMs`: lease batches leave late, shortened (server/coordinator/leaving.ts).
   */
  readonly slowDisk?: { readonly fsyncMs: number; readonly ledgerMaxWriteMs: number } | undefined
  /**
   * The kill (`coordinatorKillMs`, before the first window's edge) waits, the ledger read every
   * 5 ms, until the ledger holds every process's block of the next window, 5 ms before the edge
   * at the latest: a loaded machine may send them later than a fixed time (CI: none of them 50 ms
   * before the edge once). The run says how many it held (`aheadAtKill`).
   */
  readonly killOnceAhead?: boolean | undefined
  /** While the coordinator is down (`coordinatorKillMs`): its ledger file damaged this way. */
  readonly ledgerDamage?: LedgerDamage | undefined
  /** The restarted coordinator's wall clock, seconds off the host's (libfaketime, the coordinator only). */
  readonly restartWallOffsetSec?: number | undefined
  /**
   * Live steps of the coordinator's wall clock, no restart: at `atMs` into the first window its
   * wall clock becomes `offsetSec` off the host's (libfaketime, the coordinator only).
   */
  readonly liveSteps?: readonly { readonly atMs: number; readonly offsetSec: number }[] | undefined
  /**
   * Keys of a keyed quota reset `atMs` into the first window (POST /v1/key/reset, the admin
   * token): the run records when each answer came (`WindowedRun.resets`).
   */
  readonly resets?: {
    readonly atMs: number
    readonly prefix: string
    readonly keys: readonly string[]
  }
}

/** The admin token of a windowed run's coordinator (loopback only, a throwaway config). */
const adminToken = 'faults-admin-token-0123456789'

/** What a windowed scenario does to its first window, in words. */
export function windowedFaultText(s: WindowedFaults): string {
  const parts: string[] = []
  const stepped = (sec: number): string => `${sec > 0 ? '+' : ''}${sec} s`
  if (s.coordinatorKillMs !== undefined)
    parts.push(
      `coordinator SIGKILLed ${s.coordinatorKillMs / 1000} s in, ${s.ledgerDamage === undefined ? '' : `its ledger damaged (${s.ledgerDamage}), `}restarted ${s.restartAfterMs / 1000} s later${s.restartWallOffsetSec === undefined ? '' : ` with its wall clock ${stepped(s.restartWallOffsetSec)}`}`,
    )
  if (s.clientKillMs !== undefined)
    parts.push(
      `a client SIGKILLed ${s.clientKillMs / 1000} s in, a new process under its id ${s.restartAfterMs / 1000} s later`,
    )
  if (s.resets !== undefined)
    parts.push(`${s.resets.keys.length} spent keys reset ${s.resets.atMs / 1000} s in`)
  if (s.delayMs !== undefined) parts.push(`every link delayed ${s.delayMs} ms each way`)
  if (s.slowDisk !== undefined)
    parts.push(
      `every fdatasync ${s.slowDisk.fsyncMs} ms longer, ledgerMaxWriteMs ${s.slowDisk.ledgerMaxWriteMs}`,
    )
  for (const step of s.liveSteps ?? [])
    parts.push(
      `the coordinator's wall clock stepped to ${stepped(step.offsetSec)} ${step.atMs / 1000} s in (no restart)`,
    )
  return parts.join('; ')
}

/** What a windowed run leaves to measure: each worker's log, and when its first window opened. */
export interface WindowedRun {
  readonly outputs: readonly string[]
  readonly firstMs: number
  /** What happened in each window (those past the list: nothing). */
  readonly faults: readonly string[]
  /** Each key reset: the wall-clock time its reset was asked (before the POST), and the answer. */
  readonly resets: readonly {
    readonly key: string
    readonly atWallMs: number
    readonly status: number
    /**
     * What the coordinator counted the SIGKILLed client as holding of the key and not yet
     * reported used, just after the kill (GET /v1/key): stranded until the window's end, a lease
     * sent but not yet in force at the kill included. Absent if no client was killed after it.
     */
    readonly strandedByKill?: number
  }[]
  /** Lease batches the coordinator sent shortened, written late (its log). */
  readonly shortenedBatches: number
  /** With `killOnceAhead`: the processes whose block of the next window the ledger held at the kill. */
  readonly aheadAtKill?: number
}

/** How many entries of a file ledger at `path` hold a block of window `next` sent ahead. */
async function blocksAhead(path: string, next: number): Promise<number> {
  try {
    let n = 0
    for (const e of parseLedger(await readFile(path, 'utf8')).entries.values())
      if (e.ahead?.window === next) n++
    return n
  } catch {
    return 0
  }
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
      server: {
        host: '127.0.0.1',
        adminToken,
        limits: { heartbeatMs: 1000, roundDebounceMs: 20 },
        ...(s.slowDisk === undefined ? {} : { ledgerMaxWriteMs: s.slowDisk.ledgerMaxWriteMs }),
      },
      resources: [template],
    }),
  )
  const coordinator = new CoordinatorProcess(configPath, await freePort())
  const workers: WorkerProcess[] = []
  const proxies: TcpProxy[] = []
  const offsetFile = join(dir, 'wall-offset')
  try {
    const fsyncDelayMs = s.slowDisk?.fsyncMs
    if (s.liveSteps !== undefined) {
      await writeFile(offsetFile, '+0s')
      await coordinator.start({ wallOffsetFile: offsetFile, fsyncDelayMs })
    } else await coordinator.start({ fsyncDelayMs })
    const firstMs = Math.ceil((Date.now() + 3000) / s.windowMs) * s.windowMs
    const untilMs = firstMs + s.windows * s.windowMs - 100
    const direct = `ws://127.0.0.1:${coordinator.port}/v1/connect`
    // With a delay: each process's link through a proxy of its own (a replacement reuses it).
    if (s.delayMs !== undefined)
      for (let i = 0; i < s.processes; i++) {
        const proxy = await TcpProxy.start(coordinator.port)
        proxy.delay(s.delayMs)
        proxies.push(proxy)
      }
    const urlOf = (i: number): string =>
      proxies[i] === undefined ? direct : `ws://127.0.0.1:${proxies[i].port}/v1/connect`
    const spawnWorker = (i: number, fromWallMs: number): void => {
      workers.push(startWorker(script, specOf(i, urlOf(i), fromWallMs, untilMs, workers.length)))
    }
    for (let i = 0; i < s.processes; i++) spawnWorker(i, firstMs)
    const at = async (wallMs: number): Promise<void> => sleep(wallMs - Date.now())
    const events: { atMs: number; run: () => Promise<void> }[] = []
    let aheadAtKill: number | undefined
    if (s.coordinatorKillMs !== undefined) {
      const damage = s.ledgerDamage
      const ledgerPath = join(coordinator.dataDir, 'ledger.log')
      events.push({
        atMs: s.coordinatorKillMs,
        run: async () => {
          if (s.killOnceAhead === true) {
            const next = firstMs / s.windowMs + 1
            for (;;) {
              aheadAtKill = await blocksAhead(ledgerPath, next)
              if (aheadAtKill >= s.processes || Date.now() >= firstMs + s.windowMs - 5) break
              await sleep(5)
            }
          }
          await coordinator.stop()
          if (damage === undefined) return
          const path = join(coordinator.dataDir, 'ledger.log')
          await writeFile(path, damaged(await readFile(path, 'utf8'), damage))
        },
      })
      const offset = s.restartWallOffsetSec
      events.push({
        atMs: s.coordinatorKillMs + s.restartAfterMs,
        run: () =>
          coordinator.start(
            offset === undefined ? { fsyncDelayMs } : { wallOffsetSec: offset, fsyncDelayMs },
          ),
      })
    }
    if (s.clientKillMs !== undefined) {
      events.push({
        atMs: s.clientKillMs,
        run: async () => {
          const victim = workers[1]!
          victim.child.kill('SIGKILL')
          await victim.exited
          // What the coordinator counts it (client id `<name>-1`) holding of each key reset, left
          // unreported.
          for (const [i, r] of resets.entries()) {
            if (s.resets === undefined) break
            const res = await fetch(
              `http://127.0.0.1:${coordinator.port}/v1/key?family=${s.resets.prefix}&key=${r.key}`,
              { headers: { authorization: `Bearer ${adminToken}` } },
            )
            const view = (await res.json()) as {
              holders?: { client: string; committed: number; used?: number }[]
            }
            let stranded = 0
            for (const h of view.holders ?? [])
              if (h.client === `${name}-1`) stranded += Math.max(0, h.committed - (h.used ?? 0))
            resets[i] = { ...r, strandedByKill: stranded }
          }
        },
      })
      events.push({ atMs: s.clientKillMs + s.restartAfterMs, run: async () => spawnWorker(1, 0) })
    }
    const resets: WindowedRun['resets'][number][] = []
    const reset = s.resets
    if (reset !== undefined)
      events.push({
        atMs: reset.atMs,
        run: async () => {
          for (const key of reset.keys) {
            const atWallMs = Date.now()
            const res = await fetch(`http://127.0.0.1:${coordinator.port}/v1/key/reset`, {
              method: 'POST',
              headers: {
                authorization: `Bearer ${adminToken}`,
                'content-type': 'application/json',
              },
              body: JSON.stringify({ family: reset.prefix, key }),
            })
            await res.arrayBuffer()
            resets.push({ key, atWallMs, status: res.status })
          }
        },
      })
    for (const step of s.liveSteps ?? [])
      events.push({
        atMs: step.atMs,
        run: () => writeFile(offsetFile, `${step.offsetSec >= 0 ? '+' : ''}${step.offsetSec}s`),
      })
    // In time order; a tie keeps the order above (a kill before its restart).
    for (const e of events
      .map((e, i) => ({ ...e, i }))
      .sort((a, b) => a.atMs - b.atMs || a.i - b.i)) {
      await at(firstMs + e.atMs)
      await e.run()
    }
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
      faults: [windowedFaultText(s)],
      resets,
      shortenedBatches: shortenedInLog(coordinator.log),
      ...(aheadAtKill === undefined ? {} : { aheadAtKill }),
    }
  } finally {
    for (const w of workers) if (w.child.exitCode === null) w.child.kill('SIGKILL')
    for (const proxy of proxies) await proxy.close()
    await coordinator.stop()
    await rm(dir, { recursive: true, force: true })
  }
}
