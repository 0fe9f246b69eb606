import { systemClock, type Clock } from '../clock.js'
import { SluiceError } from '../errors.js'
import { positiveOption } from './base.js'

export interface AdaptiveThrottleOptions {
  /** Accept multiplier: the backend may reject up to 1 − 1/K before the client throttles; default 2. */
  readonly k?: number | undefined
  /** Sliding window, ms; default 120 000 (two minutes). */
  readonly windowMs?: number | undefined
  /** Uniform [0, 1); default Math.random. */
  readonly random?: (() => number) | undefined
  readonly clock?: Clock | undefined
}

/**
 * Client-side adaptive throttling (Google SRE book): the client counts its
 * requests and the backend's accepts over a sliding window and rejects
 * locally with probability max(0, (requests − K·accepts) / (requests + 1)),
 * so a struggling backend is not also buried under requests it would refuse.
 * The window is a ring of one-second buckets.
 */
export class AdaptiveThrottle {
  readonly #k: number
  readonly #bucketMs = 1000
  readonly #requests: Float64Array
  readonly #accepts: Float64Array
  readonly #clock: Clock
  readonly #random: () => number
  #bucket = -1
  #index = 0

  constructor(options: AdaptiveThrottleOptions = {}) {
    this.#k = positiveOption('AdaptiveThrottle', 'k', options.k ?? 2)
    const windowMs = positiveOption('AdaptiveThrottle', 'windowMs', options.windowMs ?? 120_000)
    const buckets = Math.max(1, Math.round(windowMs / this.#bucketMs))
    this.#requests = new Float64Array(buckets)
    this.#accepts = new Float64Array(buckets)
    this.#clock = options.clock ?? systemClock
    this.#random = options.random ?? Math.random
  }

  /** Probability of rejecting the next request locally. */
  get rejectProbability(): number {
    this.#roll()
    let requests = 0
    let accepts = 0
    for (let i = 0; i < this.#requests.length; i++) {
      requests += this.#requests[i]!
      accepts += this.#accepts[i]!
    }
    return Math.max(0, (requests - this.#k * accepts) / (requests + 1))
  }

  /** Counts a request and decides: true to send it, false to reject it locally. */
  tryAcquire(): boolean {
    const p = this.rejectProbability
    this.#requests[this.#index]!++
    return this.#random() >= p
  }

  /** Like tryAcquire, rejecting with SLUICE_ERR_CLIENT_THROTTLED instead of returning false. */
  acquire(): Promise<void> {
    return this.tryAcquire()
      ? Promise.resolve()
      : Promise.reject(new SluiceError('SLUICE_ERR_CLIENT_THROTTLED', 'rejected locally'))
  }

  /** The backend accepted a request (counts toward `accepts`). */
  recordAccept(): void {
    this.#roll()
    this.#accepts[this.#index]!++
  }

  #roll(): void {
    const bucket = Math.floor(this.#clock.now() / this.#bucketMs)
    if (bucket === this.#bucket) return
    const steps =
      this.#bucket < 0
        ? this.#requests.length
        : Math.min(this.#requests.length, bucket - this.#bucket)
    for (let s = 0; s < steps; s++) {
      this.#index = (this.#index + 1) % this.#requests.length
      this.#requests[this.#index] = 0
      this.#accepts[this.#index] = 0
    }
    this.#bucket = bucket
  }
}
