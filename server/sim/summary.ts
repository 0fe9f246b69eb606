import { convergenceMs, episodes, worstExcessOverBound, worstWindowRatio } from './metrics.js'
import type { Scenario } from './scenario.js'
import type {
  QuotaSummary,
  QuotaWindowUse,
  ConvergenceRecord,
  ResourceTrack,
  SampleRow,
  SimResourceSummary,
  SimResult,
} from './types.js'

/** Something that happened in a run, for convergence: a join, a leave, a step, a failover. */
export interface SimEvent {
  readonly atMs: number
  readonly name: string
  /** The resource it concerns; undefined: all. */
  readonly resource?: string
}

/** What summarising a run needs of it. */
export interface RunRecord {
  readonly scenario: Scenario
  readonly tickMs: number
  readonly rows: readonly SampleRow[]
  /** Events, sorted by time. */
  readonly events: readonly SimEvent[]
  readonly crashTimesMs: readonly number[]
  /** Ticks outside failover, partition and start-up windows. */
  readonly steady: (tick: number) => boolean
  /** How long after a failover the disturbed window lasts, ms. */
  readonly settleMs: number
}

/** A resource's figures over the whole run. */
export function summariseResource(
  track: ResourceTrack,
  run: RunRecord,
): Omit<SimResourceSummary, 'releasedSec'> {
  const { rows, tickMs, steady } = run
  // Over samples (1 s by default), not ticks: a bucket admits in bursts, and capping each
  // tick at its capacity would count a burst's tick as loss and its neighbour's as use.
  let utilisationSum = 0
  let utilisationSamples = 0
  let steadySum = 0
  let steadySamples = 0
  for (const row of rows) {
    if (row.resource !== track.id || row.capacity <= 0 || row.demand < row.capacity) continue
    const used = Math.min(row.admittedRate, row.capacity) / row.capacity
    utilisationSum += used
    utilisationSamples++
    if (steady(Math.round((row.tSec * 1000) / tickMs) - 1)) {
      steadySum += used
      steadySamples++
    }
  }
  const windowTicks = Math.max(1, Math.round(1000 / tickMs))
  const sampleRatios = rows
    .filter((row) => row.resource === track.id && row.capacity > 0)
    .map((row) => row.admittedRate / row.capacity)
  const over = episodes(sampleRatios, 1.01)
  const jains = rows.filter((row) => row.resource === track.id).map((row) => row.jain)
  return {
    resource: track.id,
    refreshMs: track.refreshMs,
    catchUpSec: catchUp(track, run),
    utilisation: utilisationSamples === 0 ? 1 : utilisationSum / utilisationSamples,
    utilisationSteady: steadySamples === 0 ? 1 : steadySum / steadySamples,
    worst1s: worstWindowRatio(track.admitted, track.capacityPerTick, windowTicks),
    worst1sSteady: worstWindowRatio(track.admitted, track.capacityPerTick, windowTicks, steady),
    excessOverBound: worstExcessOverBound(track.admitted, track.capacityPerTick, track.burst),
    excessOverBoundSteady: worstExcessOverBound(
      track.admitted,
      track.capacityPerTick,
      track.burst,
      steady,
    ),
    overCapacityEpisodes: over.count,
    overCapacityPeak: over.peak,
    jainMean: jains.length === 0 ? 1 : jains.reduce((a, b) => a + b, 0) / jains.length,
    jainMin: jains.length === 0 ? 1 : Math.min(...jains),
    convergence: convergence(track, run),
  }
}

/** Convergence after each event: every client within 2% of its ideal, at tick resolution. */
function convergence(track: ResourceTrack, run: RunRecord): ConvergenceRecord[] {
  const { tickMs, steady } = run
  const tickTimes = track.deviation.map((_, i) => (i + 1) * tickMs)
  const converged = track.deviation.map((d) => d <= 0.02)
  const relevant = run.events.filter((e) => e.resource === undefined || e.resource === track.id)
  const out: ConvergenceRecord[] = []
  for (const [i, event] of relevant.entries()) {
    // Events closer together than a tick are one event.
    const next = relevant.slice(i + 1).find((n) => n.atMs > event.atMs + tickMs)
    if (relevant[i + 1] !== undefined && relevant[i + 1]!.atMs <= event.atMs + tickMs) continue
    const ms = convergenceMs(tickTimes, converged, event.atMs, next?.atMs ?? Infinity)
    out.push({
      event: event.name,
      atSec: event.atMs / 1000,
      disturbed: !steady(Math.round(event.atMs / tickMs)),
      ms,
      refreshes: ms === undefined ? undefined : ms / track.refreshMs,
    })
  }
  return out
}

/**
 * Catch-up after each crash: from the crash to the end of the last sample,
 * within the disturbed window that follows it, that admitted less than 98%
 * of min(capacity, demand); 0 if none did.
 */
function catchUp(track: ResourceTrack, run: RunRecord): number[] {
  const resourceRows = run.rows.filter((row) => row.resource === track.id)
  const out: number[] = []
  for (const crashMs of run.crashTimesMs) {
    const endMs = crashMs + run.scenario.coordinator.failoverMs + run.settleMs
    let lastShortSec: number | undefined
    for (const row of resourceRows) {
      const ms = row.tSec * 1000
      if (ms <= crashMs || ms > endMs) continue
      if (row.admittedRate < 0.98 * Math.min(row.capacity, row.demand)) lastShortSec = row.tSec
    }
    out.push(lastShortSec === undefined ? 0 : lastShortSec - crashMs / 1000)
  }
  return out
}

/**
 * A quota's windows over a run: what was used of each budget, and what blocks left stranded
 * at the end of a whole window whose demand exceeded its budget.
 */
export function summariseQuota(
  windows: ReadonlyMap<number, QuotaWindowUse>,
  capacity: number,
  [runStartMs, runEndMs]: readonly [number, number],
): QuotaSummary {
  const out = [...windows.values()]
    .sort((a, b) => a.index - b.index)
    .map((w) => ({
      index: w.index,
      whole: w.startMs >= runStartMs && w.endMs <= runEndMs,
      used: w.used,
      asked: w.asked,
      capacity,
    }))
  let worstUsed = 0
  let worstStranded = 0
  for (const w of out) {
    if (capacity > 0) worstUsed = Math.max(worstUsed, w.used / capacity)
    if (w.whole && capacity > 0 && w.asked >= 1.05 * capacity)
      worstStranded = Math.max(worstStranded, (capacity - w.used) / capacity)
  }
  return { windows: out, worstUsed, worstStranded }
}

/** The scenario's `expect` block, checked against each resource's summary. */
export function checkExpectations(
  expected: Scenario['expect'],
  summaries: readonly SimResourceSummary[],
): SimResult['summary']['checks'] {
  const checks: { name: string; ok: boolean; detail: string }[] = []
  for (const s of summaries) {
    if (s.quota !== undefined) {
      // A quota's bound, always checked: no window used more than its budget.
      checks.push({
        name: `${s.resource}: used ≤ capacity in every window`,
        ok: s.quota.worstUsed <= 1 + 1e-9,
        detail: `at most ${(s.quota.worstUsed * 100).toFixed(2)}% of the budget, over ${s.quota.windows.length} window(s)`,
      })
      if (expected.maxStranded !== undefined)
        checks.push({
          name: `${s.resource}: budget stranded at a window's end ≤ ${(expected.maxStranded * 100).toFixed(1)}% when demand exceeds it`,
          ok: s.quota.worstStranded <= expected.maxStranded,
          detail: `at most ${(s.quota.worstStranded * 100).toFixed(2)}% of the budget`,
        })
      continue
    }
    if (expected.minUtilisation !== undefined)
      checks.push({
        name: `${s.resource}: utilisation under excess demand ≥ ${expected.minUtilisation}`,
        ok: s.utilisationSteady >= expected.minUtilisation,
        detail: `${(s.utilisationSteady * 100).toFixed(2)}% outside failovers`,
      })
    // Over the whole run: partitions, stalls and failovers included.
    if (expected.maxOverAdmission !== undefined)
      checks.push({
        name: `${s.resource}: admitted ≤ capacity·t + Σburst + ${expected.maxOverAdmission} over the whole run`,
        ok: s.excessOverBound <= expected.maxOverAdmission,
        detail: `worst excess ${s.excessOverBound.toFixed(1)} tokens`,
      })
    if (expected.maxConvergenceRefreshes !== undefined) {
      const worst = Math.max(
        0,
        ...s.convergence.filter((c) => !c.disturbed).map((c) => c.refreshes ?? Infinity),
      )
      checks.push({
        name: `${s.resource}: convergence within ${expected.maxConvergenceRefreshes} refresh periods of each event outside failovers`,
        ok: worst <= expected.maxConvergenceRefreshes,
        detail: `worst ${Number.isFinite(worst) ? worst.toFixed(2) : 'never'}`,
      })
    }
    if (expected.minJain !== undefined)
      checks.push({
        name: `${s.resource}: mean Jain index ≥ ${expected.minJain}`,
        ok: s.jainMean >= expected.minJain,
        detail: s.jainMean.toFixed(4),
      })
  }
  return checks
}
