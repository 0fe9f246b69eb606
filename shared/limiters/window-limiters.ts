import { systemClock, type Clock } from '../clock.js'
import { durationOption } from './duration.js'
import { SluiceError } from '../errors.js'
import { BaseLimiter, positiveOption, type LimiterShape } from './base.js'

export type WindowOptions = {
  /** Most tokens per window. */
  readonly limit: number
  readonly clock?: Clock | undefined
} & (
  | { readonly windowMs: number; readonly window?: undefined }
  /** The window as text: `'1 minute'`, `'10s'`, `'1h'`, `'1 day'` (as @fastify/rate-limit's `timeWindow`). */
  | { readonly window: string; readonly windowMs?: undefined }
)

/** The window of a limiter's options, ms: `windowMs`, or `window` as text; exactly one. */
function windowMsOf(owner: string, options: WindowOptions): number {
  if (options.window !== undefined && options.windowMs !== undefined)
    throw new SluiceError(
      'SLUICE_ERR_OPTION_INVALID',
      `${owner}: give windowMs (milliseconds) or window (a text such as '1 minute'), not both`,
    )
  return options.window !== undefined
    ? durationOption(owner, 'window', options.window)
    : positiveOption(owner, 'windowMs', options.windowMs)
}

/** Fixed window: at most `limit` per aligned window of `windowMs`; resets at each boundary. */
export class FixedWindow extends BaseLimiter {
  readonly #limit: number
  readonly #windowMs: number
  #window = -Infinity
  #used = 0
  constructor(options: WindowOptions) {
    super(options.clock ?? systemClock)
    this.#limit = positiveOption('FixedWindow', 'limit', options.limit)
    this.#windowMs = windowMsOf('FixedWindow', options)
  }
  #roll(): number {
    const now = this.clock.now()
    const w = Math.floor(now / this.#windowMs)
    if (w !== this.#window) {
      this.#window = w
      this.#used = 0
    }
    return now
  }
  protected take(cost: number): boolean {
    this.#roll()
    if (this.#used + cost > this.#limit) return false
    this.#used += cost
    return true
  }
  remaining(): number {
    this.#roll()
    return Math.max(0, Math.floor(this.#limit - this.#used))
  }
  describe(): LimiterShape {
    return { ratePerSec: (this.#limit * 1000) / this.#windowMs, burst: this.#limit }
  }
  msUntilReset(): number {
    const now = this.#roll()
    return this.#used === 0 ? 0 : (this.#window + 1) * this.#windowMs - now
  }
  refund(cost: number): void {
    this.#roll()
    this.#used = Math.max(0, this.#used - cost)
    this.serve()
  }
  msUntil(cost = 1): number {
    if (cost > this.#limit) return Infinity
    const now = this.#roll()
    return this.#used + cost <= this.#limit ? 0 : (this.#window + 1) * this.#windowMs - now
  }
}

/**
 * Sliding log: exact. Admits `cost` at time t when the costs admitted in
 * (t − windowMs, t] plus `cost` stay within `limit`. Keeps one entry per
 * distinct admission time inside the window (admissions at the same instant
 * share one), so with costs of at least 1 it never holds more than `limit`
 * entries.
 */
export class SlidingLog extends BaseLimiter {
  readonly #limit: number
  readonly #windowMs: number
  // Parallel ring of (time, cost), oldest first.
  #times: number[] = []
  #costs: number[] = []
  #head = 0
  #sum = 0
  constructor(options: WindowOptions) {
    super(options.clock ?? systemClock)
    this.#limit = positiveOption('SlidingLog', 'limit', options.limit)
    this.#windowMs = windowMsOf('SlidingLog', options)
  }
  describe(): LimiterShape {
    return { ratePerSec: (this.#limit * 1000) / this.#windowMs, burst: this.#limit }
  }
  remaining(): number {
    this.#expire(this.clock.now())
    return Math.max(0, Math.floor(this.#limit - this.#sum))
  }
  /** Entries held (for the memory bound). */
  get size(): number {
    return this.#times.length - this.#head
  }
  #expire(now: number): void {
    while (this.#head < this.#times.length && this.#times[this.#head]! <= now - this.#windowMs) {
      this.#sum -= this.#costs[this.#head]!
      this.#head++
    }
    if (this.#head > 64 && this.#head * 2 > this.#times.length) {
      this.#times = this.#times.slice(this.#head)
      this.#costs = this.#costs.slice(this.#head)
      this.#head = 0
    }
    if (this.#head === this.#times.length) this.#sum = 0 // no drift once empty
  }
  protected take(cost: number): boolean {
    const now = this.clock.now()
    this.#expire(now)
    if (this.#sum + cost > this.#limit) return false
    const last = this.#times.length - 1
    if (last >= this.#head && this.#times[last] === now) this.#costs[last]! += cost
    else {
      this.#times.push(now)
      this.#costs.push(cost)
    }
    this.#sum += cost
    return true
  }
  msUntil(cost = 1): number {
    if (cost > this.#limit) return Infinity
    const now = this.clock.now()
    this.#expire(now)
    let excess = this.#sum + cost - this.#limit
    if (excess <= 0) return 0
    for (let i = this.#head; i < this.#times.length; i++) {
      excess -= this.#costs[i]!
      if (excess <= 0) return this.#times[i]! + this.#windowMs - now
    }
    return Infinity
  }
}

/**
 * Sliding window counter: the previous window's count weighted by how much
 * of it still overlaps the sliding window, plus the current window's count.
 * Two numbers of state; approximate where the sliding log is exact.
 */
export class SlidingWindowCounter extends BaseLimiter {
  readonly #limit: number
  readonly #windowMs: number
  #window = -Infinity
  #current = 0
  #previous = 0
  constructor(options: WindowOptions) {
    super(options.clock ?? systemClock)
    this.#limit = positiveOption('SlidingWindowCounter', 'limit', options.limit)
    this.#windowMs = windowMsOf('SlidingWindowCounter', options)
  }
  #estimate(): { now: number; estimate: number } {
    const now = this.clock.now()
    const w = Math.floor(now / this.#windowMs)
    if (w !== this.#window) {
      this.#previous = w === this.#window + 1 ? this.#current : 0
      this.#current = 0
      this.#window = w
    }
    const overlap = 1 - (now - w * this.#windowMs) / this.#windowMs
    return { now, estimate: this.#previous * overlap + this.#current }
  }
  describe(): LimiterShape {
    return { ratePerSec: (this.#limit * 1000) / this.#windowMs, burst: this.#limit }
  }
  remaining(): number {
    return Math.max(0, Math.floor(this.#limit - this.#estimate().estimate))
  }
  protected take(cost: number): boolean {
    if (this.#estimate().estimate + cost > this.#limit) return false
    this.#current += cost
    return true
  }
  msUntil(cost = 1): number {
    if (cost > this.#limit) return Infinity
    const { now, estimate } = this.#estimate()
    const excess = estimate + cost - this.#limit
    if (excess <= 0) return 0
    const windowEnd = (this.#window + 1) * this.#windowMs
    // The previous window's weight falls linearly to 0 at the end of this window.
    if (this.#previous > 0 && this.#current + cost <= this.#limit)
      return Math.min(windowEnd - now, (excess / this.#previous) * this.#windowMs)
    return windowEnd - now
  }
}
