import type { Clock } from '../../shared/index.js'

/**
 * A token bucket on an injected clock: refills at `ratePerSec`, holds at most
 * `burst`. `tryTake` is the hot path: one clock read, arithmetic, no
 * allocation, no promise, no timer.
 */
export class TokenBucket {
  #ratePerMs: number
  #burst: number
  #tokens: number
  #lastMs: number
  readonly #clock: Clock

  constructor(clock: Clock, ratePerSec: number, burst: number, initialTokens = burst) {
    this.#clock = clock
    this.#ratePerMs = ratePerSec / 1000
    this.#burst = burst
    this.#tokens = Math.min(initialTokens, burst)
    this.#lastMs = clock.now()
  }

  get ratePerSec(): number {
    return this.#ratePerMs * 1000
  }

  get burst(): number {
    return this.#burst
  }

  /** Tokens available now. */
  get tokens(): number {
    this.#refill(this.#clock.now())
    return this.#tokens
  }

  /** Takes `cost` tokens if they are there. */
  tryTake(cost: number): boolean {
    const now = this.#clock.now()
    if (now > this.#lastMs) {
      const t = this.#tokens + (now - this.#lastMs) * this.#ratePerMs
      this.#tokens = t < this.#burst ? t : this.#burst
      this.#lastMs = now
    }
    if (this.#tokens < cost) return false
    this.#tokens -= cost
    return true
  }

  /** Milliseconds until `cost` tokens will be there (0 if now; Infinity if never at this rate and burst). */
  msUntil(cost: number): number {
    this.#refill(this.#clock.now())
    if (this.#tokens >= cost) return 0
    if (cost > this.#burst || this.#ratePerMs <= 0) return Infinity
    return (cost - this.#tokens) / this.#ratePerMs
  }

  /** Milliseconds until the bucket is full again. */
  msUntilFull(): number {
    this.#refill(this.#clock.now())
    if (this.#tokens >= this.#burst) return 0
    return this.#ratePerMs > 0 ? (this.#burst - this.#tokens) / this.#ratePerMs : Infinity
  }

  /** Puts back `cost` tokens taken earlier (never above the burst). */
  refund(cost: number): void {
    this.#refill(this.#clock.now())
    const t = this.#tokens + cost
    this.#tokens = t < this.#burst ? t : this.#burst
  }

  /**
   * Changes rate and burst. Tokens earned so far are counted at the old rate;
   * none are invented, and what exceeds the new burst is dropped.
   */
  setRate(ratePerSec: number, burst: number): void {
    this.#refill(this.#clock.now())
    this.#ratePerMs = ratePerSec / 1000
    this.#burst = burst
    if (this.#tokens > burst) this.#tokens = burst
  }

  #refill(now: number): void {
    if (now <= this.#lastMs) return
    const t = this.#tokens + (now - this.#lastMs) * this.#ratePerMs
    this.#tokens = t < this.#burst ? t : this.#burst
    this.#lastMs = now
  }
}
