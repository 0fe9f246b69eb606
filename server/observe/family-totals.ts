import type { Counter } from 'prom-client'
import type { Usage } from '../../shared/index.js'

interface FamilyRow {
  /** Tokens or units admitted and refused across every key since the counters were scraped. */
  admitted: number
  refused: number
  /** A keyed quota: the end of the window `windowUsed` counts in, and what was admitted in it. */
  windowEndMs: number
  windowUsed: number
}

/**
 * What the processes report a keyed family admitted and refused, summed over
 * all its keys: a series per family, never per key. Families come from the
 * config's templates, so the rows are bounded by it. A keyed quota family
 * also sums what it admitted in the window in force, starting again at 0 in
 * the next one (a report's window is the one in force when it arrives: a
 * report sent just before an edge and received after it counts in the next).
 */
export class FamilyTotals {
  readonly #rows = new Map<string, FamilyRow>()

  add(familyId: string, usage: Usage, windowEndMs: number | undefined): void {
    let row = this.#rows.get(familyId)
    if (row === undefined)
      this.#rows.set(
        familyId,
        (row = { admitted: 0, refused: 0, windowEndMs: -Infinity, windowUsed: 0 }),
      )
    row.admitted += usage.admitted
    row.refused += usage.refused
    if (windowEndMs === undefined) return
    if (row.windowEndMs !== windowEndMs) {
      row.windowEndMs = windowEndMs
      row.windowUsed = 0
    }
    row.windowUsed += usage.admitted
  }

  /** What a keyed quota family admitted in the window in force at `nowMs` (0 once it ended). */
  windowUsed(familyId: string, nowMs: number): number {
    const row = this.#rows.get(familyId)
    return row === undefined || nowMs >= row.windowEndMs ? 0 : row.windowUsed
  }

  /** Hands the admitted or refused sums to their counter and zeroes them. */
  flush(column: 'admitted' | 'refused', counter: Counter<'family'>): void {
    for (const [family, row] of this.#rows) {
      counter.inc({ family }, row[column])
      row[column] = 0
    }
  }
}
