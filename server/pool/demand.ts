/**
 * The last few demand reports of one client for one resource, turned into
 * the demand the next round allocates against: `max` over the window (the
 * default: quick to grow, slow to shrink, so a bursty client is not starved
 * between bursts) or an `ewma` with α = 2 / (window + 1).
 */
export class DemandHistory {
  readonly #samples: Float64Array
  readonly #estimator: 'max' | 'ewma'
  #next = 0
  #count = 0
  #ewma = 0
  /** The most recent report. */
  last = 0

  constructor(estimator: 'max' | 'ewma', window: number) {
    this.#estimator = estimator
    this.#samples = new Float64Array(Math.max(1, window))
  }

  record(wants: number): void {
    this.last = wants
    this.#samples[this.#next] = wants
    this.#next = (this.#next + 1) % this.#samples.length
    if (this.#count < this.#samples.length) this.#count++
    const alpha = 2 / (this.#samples.length + 1)
    this.#ewma = this.#count === 1 ? wants : alpha * wants + (1 - alpha) * this.#ewma
  }

  /** Estimated demand; 0 before any report. */
  estimate(): number {
    if (this.#count === 0) return 0
    if (this.#estimator === 'ewma') return this.#ewma
    let max = 0
    for (let i = 0; i < this.#count; i++) if (this.#samples[i]! > max) max = this.#samples[i]!
    return max
  }
}
