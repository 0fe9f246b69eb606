import type { TraceEvent } from './central.js'

/** What Sluice and the central limiter admitted of the checks that share one label. */
export interface SplitRow {
  readonly label: string
  readonly asked: number
  readonly admitted: number
  readonly central: number
  /** Checks the central limiter admitted that Sluice refused (event by event, as `compare`). */
  readonly lost: number
}

/**
 * Where Sluice admitted less than the central limiter: the trace's checks grouped by each
 * label `labelsOf` gives an event (a key's rank, the time since the start, the process, the
 * time within a quota's window: an event may count in several groupings), rows sorted by
 * label. `central` is what the central limiter admitted of each event (`replayCentral`).
 * Pure: the trace in, the rows out.
 */
export function splitLosses(
  trace: readonly TraceEvent[],
  central: readonly number[],
  labelsOf: (e: TraceEvent, i: number) => readonly string[],
): SplitRow[] {
  const rows = new Map<string, { asked: number; admitted: number; central: number; lost: number }>()
  for (const [i, e] of trace.entries()) {
    const c = central[i] ?? 0
    for (const label of labelsOf(e, i)) {
      let row = rows.get(label)
      if (row === undefined) rows.set(label, (row = { asked: 0, admitted: 0, central: 0, lost: 0 }))
      row.asked += e.asked
      row.admitted += e.admitted
      row.central += c
      row.lost += Math.max(0, c - e.admitted)
    }
  }
  return [...rows]
    .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
    .map(([label, row]) => ({ label, ...row }))
}

/** A key's rank band (the bench's keys are `k<rank>`, rank 0 the most asked), or `other`. */
export function rankBand(key: string): string {
  const rank = /^k(\d+)$/.exec(key)?.[1]
  if (rank === undefined) return 'keys: other'
  const n = Number(rank)
  const bands = [10, 30, 100, 300]
  for (const [i, upTo] of bands.entries())
    if (n < upTo) return `keys: rank ${String(i === 0 ? 0 : bands[i - 1]).padStart(3)}-${upTo - 1}`
  return 'keys: rank 300+'
}
