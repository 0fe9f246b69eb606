import type { ResourceKind } from '../shared/index.js'

/**
 * Measured demand of one resource: tokens asked for (granted or refused,
 * waiting callers included) per second over the current report window. For
 * a concurrency resource, the peak of in-flight plus waiting over the window.
 */
export class DemandMeter {
  #asked = 0
  #windowStartMs: number
  #peak = 0

  constructor(nowMs: number) {
    this.#windowStartMs = nowMs
  }

  /** Records tokens asked for (rate). */
  ask(cost: number): void {
    this.#asked += cost
  }

  /** Records the slots in use or waited for (concurrency). */
  observe(slots: number): void {
    if (slots > this.#peak) this.#peak = slots
  }

  /** Demand over the window ending now, then starts a new window. */
  take(nowMs: number, kind: ResourceKind, current: number): number {
    const elapsedSec = Math.max(0.001, (nowMs - this.#windowStartMs) / 1000)
    const value = kind === 'rate' ? this.#asked / elapsedSec : Math.max(this.#peak, current)
    this.#asked = 0
    this.#peak = current
    this.#windowStartMs = nowMs
    return value
  }

  /** Rate asked for so far in this window (for the early-report check). */
  rateSoFar(nowMs: number): number {
    const elapsedSec = (nowMs - this.#windowStartMs) / 1000
    return elapsedSec > 0 ? this.#asked / elapsedSec : 0
  }
}
