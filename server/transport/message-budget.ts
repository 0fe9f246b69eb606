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
    this.#refill(nowMs)
    if (this.#tokens < cost) return false
    this.#tokens -= cost
    return true
  }

  /** Takes as many whole units as there are, up to `n`; returns how many. */
  takeUpTo(nowMs: number, n: number): number {
    this.#refill(nowMs)
    const taken = Math.max(0, Math.min(n, Math.floor(this.#tokens)))
    this.#tokens -= taken
    return taken
  }

  /** Gives back `cost` taken before (never above the burst). */
  giveBack(cost = 1): void {
    this.#tokens = Math.min(this.#burst, this.#tokens + cost)
  }

  /** Milliseconds until `cost` may be taken (Infinity when above the burst). */
  msUntil(nowMs: number, cost = 1): number {
    this.#refill(nowMs)
    if (this.#tokens >= cost) return 0
    return cost > this.#burst ? Infinity : (cost - this.#tokens) / this.#ratePerMs
  }

  #refill(nowMs: number): void {
    const elapsed = nowMs - this.#lastMs
    if (elapsed > 0) {
      this.#tokens = Math.min(this.#burst, this.#tokens + elapsed * this.#ratePerMs)
      this.#lastMs = nowMs
    }
  }
}
