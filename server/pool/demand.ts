import type { DemandEstimator } from '../../shared/index.js'

/**
 * How much of a peak the `fast` estimator still counts one report later: a
 * drop of up to 8× is followed at the next report, a collapse beyond that
 * over two or three (a report taken in a stall does not take a client's
 * whole share for a period).
 */
export const peakDecayPerReport = 0.125

/**
 * The last few demand reports of one client for one resource, turned into
 * the demand the next round allocates against:
 *
 * - `fast` (the default): rises at once; follows a drop once `window` (1)
 *   reports in a row are lower, to the highest of them; and keeps a peak
 *   that decays to an eighth per report, so a collapse is followed in steps.
 *   Never below the latest report. The simulator chose it (docs/benchmarks.md).
 * - `max` over the window: quick to grow, slow to shrink (a drop is seen
 *   `window` reports late).
 * - `ewma` with α = 2 / (window + 1).
 */
export class DemandHistory {
  /** A plain array: a typed array's buffer costs ~150 bytes more per entry (a family's hot keys, by the thousand). */
  readonly #samples: number[]
  readonly #estimator: DemandEstimator
  #next = 0
  #count = 0
  #ewma = 0
  #peak = 0
  /** The most recent report. */
  last = 0

  constructor(estimator: DemandEstimator, window: number) {
    this.#estimator = estimator
    this.#samples = new Array<number>(Math.max(1, window)).fill(0)
  }

  record(wants: number): void {
    this.last = wants
    this.#samples[this.#next] = wants
    this.#next = (this.#next + 1) % this.#samples.length
    if (this.#count < this.#samples.length) this.#count++
    const alpha = 2 / (this.#samples.length + 1)
    this.#ewma = this.#count === 1 ? wants : alpha * wants + (1 - alpha) * this.#ewma
    const decayed = this.#peak * peakDecayPerReport
    this.#peak = wants > decayed ? wants : decayed
  }

  /** Estimated demand; 0 before any report. */
  estimate(): number {
    if (this.#count === 0) return 0
    if (this.#estimator === 'ewma') return this.#ewma
    let max = 0
    for (let i = 0; i < this.#count; i++) if (this.#samples[i]! > max) max = this.#samples[i]!
    if (this.#estimator === 'fast' && this.#peak > max) return this.#peak
    return max
  }
}
