import { systemClock, type Clock } from '../clock.js'
import { SluiceError } from '../errors.js'
import { BaseLimiter, positiveOption } from './base.js'

export interface LeakyQueueOptions {
  /** Output rate, tokens per second: admissions are spaced cost / rate apart. */
  readonly ratePerSec: number
  /** Most callers waiting; beyond, acquire rejects with SLUICE_ERR_CLIENT_QUEUE_FULL. Default 1000. */
  readonly maxQueue?: number | undefined
  readonly clock?: Clock | undefined
}

/**
 * Leaky bucket as a shaping queue: callers wait in a bounded FIFO queue and
 * leave it at a constant rate, so the output never bursts. `tryAcquire`
 * admits only when the queue is empty and the output slot is free now.
 */
export class LeakyQueue extends BaseLimiter {
  readonly #intervalMs: number
  #nextFreeMs: number
  constructor(options: LeakyQueueOptions) {
    super(
      options.clock ?? systemClock,
      Math.floor(positiveOption('LeakyQueue', 'maxQueue', options.maxQueue ?? 1000)),
    )
    this.#intervalMs = 1000 / positiveOption('LeakyQueue', 'ratePerSec', options.ratePerSec)
    this.#nextFreeMs = this.clock.now()
  }
  protected take(cost: number): boolean {
    const now = this.clock.now()
    if (now < this.#nextFreeMs) return false
    this.#nextFreeMs = now + cost * this.#intervalMs
    return true
  }
  msUntil(): number {
    return Math.max(0, this.#nextFreeMs - this.clock.now())
  }
}

export interface WarmUpOptions {
  /** Full rate, tokens per second, reached after `warmupMs` of use. */
  readonly ratePerSec: number
  /** Ramp length. */
  readonly warmupMs: number
  /** The cold rate is ratePerSec / coldFactor; default 3 (as Guava's SmoothWarmingUp). */
  readonly coldFactor?: number | undefined
  /** Most tokens at once; default one second of the current rate. */
  readonly burst?: number | undefined
  readonly clock?: Clock | undefined
}

/**
 * A limiter that starts cold: its rate ramps linearly from ratePerSec /
 * coldFactor to ratePerSec over `warmupMs` of use, and cools back down
 * after `warmupMs` unused, so a backend that was idle (cold caches, closed
 * connections) is not hit at full rate at once.
 */
export class WarmUpLimiter extends BaseLimiter {
  readonly #rate: number
  readonly #coldRate: number
  readonly #warmupMs: number
  readonly #burst: number
  #tokens = 0
  #lastMs: number
  #warmSinceMs: number
  #lastUseMs = -Infinity
  constructor(options: WarmUpOptions) {
    super(options.clock ?? systemClock)
    this.#rate = positiveOption('WarmUpLimiter', 'ratePerSec', options.ratePerSec)
    this.#warmupMs = positiveOption('WarmUpLimiter', 'warmupMs', options.warmupMs)
    const factor = positiveOption('WarmUpLimiter', 'coldFactor', options.coldFactor ?? 3)
    if (factor < 1)
      throw new SluiceError(
        'SLUICE_ERR_OPTION_INVALID',
        `WarmUpLimiter: coldFactor must be ≥ 1, received ${factor}`,
      )
    this.#coldRate = this.#rate / factor
    this.#burst = positiveOption('WarmUpLimiter', 'burst', options.burst ?? this.#rate)
    this.#lastMs = this.clock.now()
    this.#warmSinceMs = this.#lastMs
  }
  /** Rate in force at `now`, tokens per second. */
  rateAt(now: number): number {
    const warmth = Math.min(1, Math.max(0, now - this.#warmSinceMs) / this.#warmupMs)
    return this.#coldRate + (this.#rate - this.#coldRate) * warmth
  }
  #refill(now: number): void {
    // Idle for a whole warm-up period: cold again.
    if (now - this.#lastUseMs >= this.#warmupMs) this.#warmSinceMs = now
    if (now > this.#lastMs) {
      // Trapezoid: the rate changes linearly across the step.
      const avg = (this.rateAt(this.#lastMs) + this.rateAt(now)) / 2
      this.#tokens = Math.min(
        this.#burstAt(now),
        this.#tokens + ((now - this.#lastMs) * avg) / 1000,
      )
      this.#lastMs = now
    }
  }
  #burstAt(now: number): number {
    return Math.max(1, (this.#burst * this.rateAt(now)) / this.#rate)
  }
  protected take(cost: number): boolean {
    const now = this.clock.now()
    this.#refill(now)
    this.#lastUseMs = now
    if (this.#tokens < cost) return false
    this.#tokens -= cost
    return true
  }
  msUntil(cost = 1): number {
    if (cost > this.#burst) return Infinity
    const now = this.clock.now()
    this.#refill(now)
    if (this.#tokens >= cost) return 0
    // Conservative: at least the current rate until enough tokens arrive.
    return ((cost - this.#tokens) / this.rateAt(now)) * 1000
  }
}
