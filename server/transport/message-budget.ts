/**
 * Messages a connection may still send: a token bucket of `ratePerSec`,
 * holding at most `burst`. Pure: the caller passes the time.
 */
export class MessageBudget {
  readonly #ratePerMs: number
  readonly #burst: number
  #tokens: number
  #lastMs: number

  constructor(ratePerSec: number, burst: number, nowMs: number) {
    this.#ratePerMs = ratePerSec / 1000
    this.#burst = burst
    this.#tokens = burst
    this.#lastMs = nowMs
  }

  /** Spends `cost` (one message by default); false when the budget is exhausted. */
  take(nowMs: number, cost = 1): boolean {
    const elapsed = nowMs - this.#lastMs
    if (elapsed > 0) {
      this.#tokens = Math.min(this.#burst, this.#tokens + elapsed * this.#ratePerMs)
      this.#lastMs = nowMs
    }
    if (this.#tokens < cost) return false
    this.#tokens -= cost
    return true
  }
}
