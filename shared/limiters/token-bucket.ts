import type { Clock } from '../clock.js'
import { CoarseClock } from '../coarse-clock.js'

/**
 * A token bucket on an injected clock: refills at `ratePerSec`, holds at most
 * `burst`. `tryTake` is the hot path: one clock read, arithmetic, no
 * allocation, no promise, no timer.
 *
 * On a CoarseClock (a cached reading that lags real time) a take at one
 * reading may really happen as late as the clock's next reading, so the
 * refill up to then is capped before what was taken is subtracted, as if it
 * were all taken at that moment: the bucket never holds more than an exact
 * bucket would, however late the readings come
 * (test/client/limiters/coarse-clock.test.ts proves the interval bound). On
 * a precise clock what was taken was taken at the reading itself.
 */
export class TokenBucket {
  #ratePerMs: number
  #burst: number
  /** Tokens at `#lastMs` before what was taken since (`#taken`). */
  #tokens: number
  #taken = 0
  #lastMs: number
  /**
   * Tokens above the burst kept from a fall (`setRate` with `excessGoesPerSec`) leave at this
   * rate per ms; 0 when the bucket holds no such excess (the common case).
   */
  #excessDecayPerMs = 0
  /** The coarse clock's index of the reading `#lastMs` is. */
  #lastReading = 0
  readonly #coarse: CoarseClock | undefined
  readonly #clock: Clock

  constructor(clock: Clock, ratePerSec: number, burst: number, initialTokens = burst) {
    this.#clock = clock
    this.#ratePerMs = ratePerSec / 1000
    this.#burst = burst
    this.#tokens = Math.min(initialTokens, burst)
    this.#lastMs = clock.now()
    this.#coarse = clock instanceof CoarseClock ? clock : undefined
    if (this.#coarse !== undefined) this.#lastReading = this.#coarse.readingIndex
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
    return this.tokensAtLastReading
  }

  /** Tokens there were at the last clock reading, after what was taken at it; reads no clock. */
  get tokensAtLastReading(): number {
    return this.#tokens - this.#taken
  }

  /** Milliseconds from the last clock reading until the bucket is full; reads no clock. */
  msUntilFullAtLastReading(): number {
    // Not `this.tokensAtLastReading`: the extra inlined call cost about 240 instructions per
    // request in a loop of RateLimitCore.decide (1,690 -> 1,932), V8's inlining budget again.
    const tokens = this.#tokens - this.#taken
    if (tokens >= this.#burst) return 0
    return this.#ratePerMs > 0 ? (this.#burst - tokens) / this.#ratePerMs : Infinity
  }

  /** Takes `cost` tokens if they are there. */
  tryTake(cost: number): boolean {
    const now = this.#clock.now()
    if (now > this.#lastMs) this.#refill(now)
    if (this.#tokens - this.#taken < cost) return false
    this.#taken += cost
    return true
  }

  /** Milliseconds until `cost` tokens will be there (0 if now; Infinity if never at this rate and burst). */
  msUntil(cost: number): number {
    this.#refill(this.#clock.now())
    const tokens = this.#tokens - this.#taken
    if (tokens >= cost) return 0
    if (cost > this.#burst || this.#ratePerMs <= 0) return Infinity
    return (cost - tokens) / this.#ratePerMs
  }

  /** Milliseconds until the bucket is full again. */
  msUntilFull(): number {
    this.#refill(this.#clock.now())
    return this.msUntilFullAtLastReading()
  }

  /** Puts back `cost` tokens taken earlier (never above the burst). */
  refund(cost: number): void {
    this.#refill(this.#clock.now())
    // Give back from what was taken since the last reading first, then to the bucket (capped).
    const back = cost < this.#taken ? cost : this.#taken
    this.#taken -= back
    const t = this.#tokens + (cost - back)
    this.#tokens = t < this.#burst ? t : this.#burst
  }

  /**
   * Changes rate and burst. Tokens earned so far are counted at the old rate;
   * none are invented. What exceeds the new burst is dropped, or, given
   * `excessGoesPerSec` > 0, kept and left to go at that rate, earning nothing
   * meanwhile: spent here as it may be, and gone once the bucket is back at
   * its burst. A share that falls passes the rate every other holder of the
   * limit may earn at together (the whole rate less its own new one), so the
   * tokens held across the processes never grow while any excess is kept,
   * however full a riser's bucket was (docs/keys.md, "A share that falls").
   */
  setRate(ratePerSec: number, burst: number, excessGoesPerSec = 0): void {
    this.#refill(this.#clock.now())
    const fell = ratePerSec / 1000 < this.#ratePerMs
    this.#ratePerMs = ratePerSec / 1000
    this.#burst = burst
    if (this.#tokens - this.#taken <= burst) {
      this.#excessDecayPerMs = 0
      return
    }
    // Kept from a fall of the rate (or a fall before it still going); a burst cut alone drops it.
    if (excessGoesPerSec > 0 && (fell || this.#excessDecayPerMs > 0))
      this.#excessDecayPerMs = excessGoesPerSec / 1000
    else {
      this.#tokens = burst + this.#taken
      this.#excessDecayPerMs = 0
    }
  }

  /** Tokens above the burst still kept from a fall (0 without). */
  get excess(): number {
    const t = this.tokens
    return t > this.#burst ? t - this.#burst : 0
  }

  /** Fills the bucket to its burst (what a lease that may start full allows). */
  fill(): void {
    this.#refill(this.#clock.now())
    this.#tokens = this.#burst + this.#taken
    this.#excessDecayPerMs = 0
  }

  #refill(now: number): void {
    if (now <= this.#lastMs) return
    if (this.#excessDecayPerMs > 0) {
      if (this.#tokens - this.#taken > this.#burst) return this.#decayExcess(now)
      // Spent below the burst: it earns as ever from here.
      this.#excessDecayPerMs = 0
    }
    const coarse = this.#coarse
    let t = this.#tokens
    if (coarse !== undefined) {
      // What was taken at the last reading was taken by the clock's next one at the latest:
      // earn up to then, capped, as if it were all taken then.
      const takenByMs = coarse.readingAfter(this.#lastReading)
      t += (takenByMs - this.#lastMs) * this.#ratePerMs
      if (t > this.#burst) t = this.#burst
      t += (now - takenByMs) * this.#ratePerMs - this.#taken
      this.#lastReading = coarse.readingIndex
    } else t += (now - this.#lastMs) * this.#ratePerMs - this.#taken
    this.#tokens = t < this.#burst ? t : this.#burst
    this.#taken = 0
    this.#lastMs = now
  }

  /**
   * A bucket over its burst (kept from a fall): the excess goes at its rate and nothing is
   * earned until the bucket is back at its burst (full: earning would add nothing).
   */
  #decayExcess(now: number): void {
    let t = this.#tokens - this.#taken - (now - this.#lastMs) * this.#excessDecayPerMs
    if (t <= this.#burst) {
      t = this.#burst
      this.#excessDecayPerMs = 0
    }
    this.#tokens = t
    this.#taken = 0
    this.#lastMs = now
    if (this.#coarse !== undefined) this.#lastReading = this.#coarse.readingIndex
  }
}
