import { clockDriftShare } from '../shared/index.js'

/**
 * When this process handled the coordinator's newest stamped lease batches (`lease.at`, the
 * coordinator's clock as it sent each), on this connection: a time the coordinator names on
 * its clock is placed on this process's from the batch that came soonest, not only from the
 * one that names it (whose delay may be a busy event loop's).
 *
 * Placed from batch j, a coordinator time T falls no sooner than `receivedMs_j + (T − at_j)`
 * stretched by the clocks' drift: the batch left at `at_j` and came after it. Of those, the
 * soonest is still no sooner than T; each older batch pays the drift over the time since it.
 * Only batches of one connection are compared (one coordinator process's clock): `reset` on
 * each new one.
 */
export class CoordinatorStamps {
  static readonly size = 8
  readonly #receivedMs = new Float64Array(CoordinatorStamps.size)
  readonly #atMs = new Float64Array(CoordinatorStamps.size)
  #count = 0
  #next = 0

  /** A new connection: its coordinator's clock is another. */
  reset(): void {
    this.#count = 0
    this.#next = 0
  }

  /** A batch stamped `atMs` (the coordinator's clock, whole ms, floored) handled at `receivedMs`. */
  note(receivedMs: number, atMs: number): void {
    this.#receivedMs[this.#next] = receivedMs
    this.#atMs[this.#next] = atMs
    this.#next = (this.#next + 1) % CoordinatorStamps.size
    this.#count = Math.min(this.#count + 1, CoordinatorStamps.size)
  }

  /**
   * How long after `receivedMs` a time `inMs` after the batch stamped `atMs` (handled at
   * `receivedMs`) is, at most: `inMs` itself as that batch places it, or less when an earlier
   * batch came sooner. Each earlier batch pays the drift over the coordinator's time since it,
   * and a ms for the stamps' flooring (the later stamp may be a ms short of its true time).
   */
  placeAfter(atMs: number, receivedMs: number, inMs: number): number {
    // After `receivedMs`, as each batch places it (its own: `inMs`, exactly).
    let placedMs = inMs
    for (let i = 0; i < this.#count; i++) {
      const sinceMs = atMs - this.#atMs[i]!
      if (!(sinceMs >= 0)) continue
      const ms = this.#receivedMs[i]! - receivedMs + (sinceMs + 1 + inMs) * (1 + clockDriftShare)
      if (ms < placedMs) placedMs = ms
    }
    return Math.max(0, Math.ceil(placedMs))
  }
}
