import { systemClock, type Clock } from '../clock.js'
import { BaseLimiter, positiveOption, type LimiterShape } from './base.js'
import { TokenBucket } from './token-bucket.js'

export interface RateOptions {
  /** Sustained rate, tokens per second. */
  readonly ratePerSec: number
  /** Most tokens at once; default one second of rate. */
  readonly burst?: number | undefined
  readonly clock?: Clock | undefined
}

/** Token bucket: refills at `ratePerSec`, holds at most `burst`; starts full. */
export class TokenBucketLimiter extends BaseLimiter {
  readonly #bucket: TokenBucket
  constructor(options: RateOptions) {
    super(options.clock ?? systemClock)
    const rate = positiveOption('TokenBucketLimiter', 'ratePerSec', options.ratePerSec)
    const burst = positiveOption('TokenBucketLimiter', 'burst', options.burst ?? rate)
    this.#bucket = new TokenBucket(this.clock, rate, burst)
  }
  protected take(cost: number): boolean {
    return this.#bucket.tryTake(cost)
  }
  msUntil(cost = 1): number {
    return this.#bucket.msUntil(cost)
  }
  remaining(): number {
    return Math.floor(this.#bucket.tokens)
  }
  describe(): LimiterShape {
    return { ratePerSec: this.#bucket.ratePerSec, burst: this.#bucket.burst }
  }
  msUntilReset(): number {
    return this.#bucket.msUntilFull()
  }
  remainingAtLastReading(): number {
    return Math.floor(this.#bucket.tokensAtLastReading)
  }
  msUntilResetAtLastReading(): number {
    return this.#bucket.msUntilFullAtLastReading()
  }
  refund(cost: number): void {
    this.#bucket.refund(cost)
    this.serve()
  }
}

/**
 * GCRA (generic cell rate algorithm): one number of state, the theoretical
 * arrival time. Admits exactly what a token bucket of the same rate and
 * burst admits.
 */
export class Gcra extends BaseLimiter {
  readonly #intervalMs: number
  readonly #toleranceMs: number
  #tatMs: number
  constructor(options: RateOptions) {
    super(options.clock ?? systemClock)
    const rate = positiveOption('Gcra', 'ratePerSec', options.ratePerSec)
    const burst = positiveOption('Gcra', 'burst', options.burst ?? rate)
    this.#intervalMs = 1000 / rate
    this.#toleranceMs = burst * this.#intervalMs
    this.#tatMs = this.clock.now()
  }
  describe(): LimiterShape {
    return { ratePerSec: 1000 / this.#intervalMs, burst: this.#toleranceMs / this.#intervalMs }
  }
  remaining(): number {
    const now = this.clock.now()
    const used = Math.max(0, this.#tatMs - now)
    return Math.floor((this.#toleranceMs - used) / this.#intervalMs)
  }
  msUntilReset(): number {
    return Math.max(0, this.#tatMs - this.clock.now())
  }
  refund(cost: number): void {
    this.#tatMs = Math.max(this.clock.now(), this.#tatMs - cost * this.#intervalMs)
    this.serve()
  }
  protected take(cost: number): boolean {
    const now = this.clock.now()
    const tat = (this.#tatMs > now ? this.#tatMs : now) + cost * this.#intervalMs
    if (tat - now > this.#toleranceMs) return false
    this.#tatMs = tat
    return true
  }
  msUntil(cost = 1): number {
    if (cost * this.#intervalMs > this.#toleranceMs) return Infinity
    const now = this.clock.now()
    const tat = (this.#tatMs > now ? this.#tatMs : now) + cost * this.#intervalMs
    return Math.max(0, tat - now - this.#toleranceMs)
  }
}

/**
 * Leaky bucket as a meter: a level that drains at `ratePerSec` and may not
 * exceed `burst`; each admission pours `cost` in. Polices like a token
 * bucket seen from the other side.
 */
export class LeakyBucket extends BaseLimiter {
  readonly #drainPerMs: number
  readonly #capacity: number
  #level = 0
  #lastMs: number
  constructor(options: RateOptions) {
    super(options.clock ?? systemClock)
    this.#drainPerMs = positiveOption('LeakyBucket', 'ratePerSec', options.ratePerSec) / 1000
    this.#capacity = positiveOption('LeakyBucket', 'burst', options.burst ?? options.ratePerSec)
    this.#lastMs = this.clock.now()
  }
  describe(): LimiterShape {
    return { ratePerSec: this.#drainPerMs * 1000, burst: this.#capacity }
  }
  remaining(): number {
    this.#drain()
    return Math.floor(this.#capacity - this.#level)
  }
  msUntilReset(): number {
    this.#drain()
    return this.#level / this.#drainPerMs
  }
  refund(cost: number): void {
    this.#drain()
    this.#level = Math.max(0, this.#level - cost)
    this.serve()
  }
  #drain(): void {
    const now = this.clock.now()
    if (now > this.#lastMs) {
      this.#level = Math.max(0, this.#level - (now - this.#lastMs) * this.#drainPerMs)
      this.#lastMs = now
    }
  }
  protected take(cost: number): boolean {
    this.#drain()
    if (this.#level + cost > this.#capacity) return false
    this.#level += cost
    return true
  }
  msUntil(cost = 1): number {
    if (cost > this.#capacity) return Infinity
    this.#drain()
    return Math.max(0, (this.#level + cost - this.#capacity) / this.#drainPerMs)
  }
}
