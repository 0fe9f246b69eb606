import type { QuotaWorkerSpec } from './quota-worker.js'
import { runWindowedFaults, type WindowedFaults } from './windowed.js'

/**
 * The quota fault scenario: a quota of `capacity` units per `windowMs` window (aligned to the
 * epoch), `processes` client processes each asking `ratePerSec` (together well above the
 * budget), for `windows` whole windows. In the first window the coordinator is SIGKILLed
 * `coordinatorKillMs` in and restarted `restartAfterMs` later (same data directory), and
 * process 1 is SIGKILLed `clientKillMs` in and a new process takes its id `restartAfterMs`
 * later; the windows after it are left alone.
 */
export interface QuotaScenario extends WindowedFaults {
  readonly processes: number
  readonly ratePerSec: number
  readonly capacity: number
  readonly windowMs: number
  readonly windows: number
  readonly refreshMs: number
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
  /**
   * Of each process (in the order started, a replacement last), what it was granted of the
   * window's budget and did not spend (its last `budget` line less what it admitted under the
   * window's leases): where a window's budget went unused. The rest, the budget less what all
   * were granted, was never granted.
   */
  readonly unspent: readonly number[]
  /** The budget less what every process was granted of it. */
  readonly neverGranted: number
}

export interface QuotaResult {
  readonly capacity: number
  readonly windows: readonly QuotaWindowResult[]
  /**
   * Units admitted per window as the coordinator counts them: by the window of the lease each
   * admission was made under (what the processes logged), whatever their clocks say. The two
   * differ only where the coordinator's windows and the processes' clocks disagree (a stepped
   * clock being caught up, docs/operations.md).
   */
  readonly leaseWindows: readonly { readonly index: number; readonly used: number }[]
  /**
   * Units admitted with a window's budget after that window ended by the wall clock (a tick
   * whose lease was of an earlier window than its time's), and not spent from the next
   * window's block too (between two windows, client/enforcer.ts): what crossed an edge. 0 when
   * a client stops spending a window by its end, whatever the delays.
   */
  readonly spilled: number
  /** Lease batches the coordinator sent shortened, written late (runQuotaScenario only). */
  readonly shortenedBatches?: number
  /** With `killOnceAhead`: processes whose block of the next window the ledger held at the kill. */
  readonly aheadAtKill?: number
}

/** Runs the quota scenario with real processes; counts what the client processes logged. */
export async function runQuotaScenario(s: QuotaScenario = quotaScenario): Promise<QuotaResult> {
  const template = {
    match: 'mail',
    kind: 'quota',
    capacity: s.capacity,
    window: `${s.windowMs / 1000}s`,
    refreshMs: s.refreshMs,
    graceMs: 200,
    demand: { estimator: 'max', window: 4 },
  }
  const run = await runWindowedFaults(
    s,
    'quota',
    template,
    'quota-worker',
    (i, url, fromWallMs, untilWallMs): QuotaWorkerSpec => ({
      url,
      clientId: `q-${i}`,
      resource: 'mail',
      fromWallMs,
      untilWallMs,
      tickMs: 10,
      ratePerSec: s.ratePerSec,
    }),
  )
  return {
    ...measureQuota(s, run.outputs, run.firstMs, run.faults),
    shortenedBatches: run.shortenedBatches,
    ...(run.aheadAtKill === undefined ? {} : { aheadAtKill: run.aheadAtKill }),
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
  const byLease = new Map<number, number>()
  // Per process and window of the scenario: granted (its newest lease's budget of the window, which
  // counts the window's whole), and admitted under the window's leases.
  const granted = outputs.map(() => new Array<number>(s.windows).fill(0))
  const spent = outputs.map(() => new Array<number>(s.windows).fill(0))
  let spilled = 0
  for (const [p, output] of outputs.entries())
    for (const line of output.split('\n')) {
      if (line === '') continue
      const r = JSON.parse(line) as {
        w?: number
        i?: number
        j?: number
        admitted?: number
        refused?: number
        budget?: number
        window?: number
      }
      if (r.budget !== undefined && r.window !== undefined) {
        const k = r.window - first
        if (k >= 0 && k < s.windows) granted[p]![k] = r.budget
      }
      if (r.w === undefined || r.admitted === undefined) continue
      if (r.i !== undefined) byLease.set(r.i, (byLease.get(r.i) ?? 0) + r.admitted)
      if (r.i !== undefined && r.i - first >= 0 && r.i - first < s.windows)
        spent[p]![r.i - first]! += r.admitted
      // Spent of an ended window only: a unit spent from the next window's block too (`j`,
      // admitted between the windows) counts in the window of its time.
      const at = Math.floor(r.w / s.windowMs)
      if (r.i !== undefined && r.i < at && !(r.j !== undefined && r.j >= at)) spilled += r.admitted
      const i = Math.floor(r.w / s.windowMs) - first
      // Admissions outside the scenario's windows (a tick before the first): counted nowhere.
      if (i < 0 || i >= s.windows) continue
      used[i]! += r.admitted
      asked[i]! += r.admitted + (r.refused ?? 0)
    }
  return {
    capacity: s.capacity,
    spilled,
    leaseWindows: [...byLease]
      .sort((a, b) => a[0] - b[0])
      .map(([index, n]) => ({ index, used: n })),
    windows: used.map((u, i) => ({
      index: first + i,
      used: u,
      asked: asked[i]!,
      fault: faults[i] ?? 'none',
      unspent: granted.map((g, p) => g[i]! - spent[p]![i]!),
      neverGranted: s.capacity - granted.reduce((sum, g) => sum + g[i]!, 0),
    })),
  }
}
