import { systemClock, type Clock } from '../clock.js'
import { SluiceError } from '../errors.js'
import { WaitQueue } from './wait-queue.js'
import { positiveOption, type LimiterAcquireOptions } from './base.js'

/** What `acquire` hands out: call `release()` once the work is done (idempotent). */
export interface SlotRelease {
  release(): void
}

/**
 * A concurrency limit: at most `limit` slots in use. `acquire` waits in FIFO
 * order and resolves to a release handle; `tryAcquire` must be paired with
 * `release(cost)`. `msUntil` is 0 when slots are free and Infinity
 * otherwise: the wait depends on releases, not on time.
 */
export class Semaphore {
  #limit: number
  #inUse = 0
  readonly #waiters: WaitQueue<SlotRelease>
  readonly #admit = (cost: number): boolean => {
    if (this.#inUse + cost > this.#limit) return false
    this.#inUse += cost
    return true
  }
  readonly #handle = (cost: number): SlotRelease => {
    let released = false
    return {
      release: () => {
        if (released) return
        released = true
        this.release(cost)
      },
    }
  }

  constructor(options: {
    limit: number
    maxWaiters?: number | undefined
    clock?: Clock | undefined
  }) {
    this.#limit = Math.floor(positiveOption('Semaphore', 'limit', options.limit, true))
    this.#waiters = new WaitQueue<SlotRelease>(
      options.clock ?? systemClock,
      options.maxWaiters ?? 10_000,
      () => this.#serve(),
    )
  }

  get limit(): number {
    return this.#limit
  }
  get inUse(): number {
    return this.#inUse
  }
  get waiting(): number {
    return this.#waiters.length
  }

  /** Changes the limit; waiters are served if it grew. In-use slots above a lower limit drain as they are released. */
  setLimit(limit: number): void {
    this.#limit = Math.max(0, Math.floor(limit))
    this.#serve()
  }

  tryAcquire(cost = 1): boolean {
    return this.#waiters.length === 0 && this.#admit(cost)
  }

  release(cost = 1): void {
    this.#inUse = Math.max(0, this.#inUse - cost)
    this.#serve()
  }

  msUntil(cost = 1): number {
    return this.#waiters.length === 0 && this.#inUse + cost <= this.#limit ? 0 : Infinity
  }

  acquire(cost = 1, options: LimiterAcquireOptions = {}): Promise<SlotRelease> {
    if (this.tryAcquire(cost)) return Promise.resolve(this.#handle(cost))
    return this.#waiters.enqueue(cost, options, 'acquire')
  }

  #serve(): void {
    this.#waiters.serve(this.#admit, this.#handle)
  }
}

export interface AimdOptions {
  /** Starting limit; default 10. */
  readonly initialLimit?: number | undefined
  readonly minLimit?: number | undefined
  readonly maxLimit?: number | undefined
  /** A completion slower than this counts as a congestion signal, like an error; default none. */
  readonly latencyThresholdMs?: number | undefined
  /** Multiplicative decrease; default 0.5. */
  readonly backoffRatio?: number | undefined
  readonly clock?: Clock | undefined
}

/**
 * A concurrency limit that finds its own level (TCP-style AIMD): each
 * healthy completion adds 1/limit (so +1 per limit's worth of completions),
 * each error or too-slow completion multiplies it by `backoffRatio`.
 */
export class AimdConcurrencyLimit {
  readonly #semaphore: Semaphore
  #limit: number
  readonly #min: number
  readonly #max: number
  readonly #latencyThresholdMs: number
  readonly #ratio: number

  constructor(options: AimdOptions = {}) {
    this.#min = Math.max(1, Math.floor(options.minLimit ?? 1))
    this.#max = Math.floor(options.maxLimit ?? 1000)
    this.#limit = Math.min(this.#max, Math.max(this.#min, options.initialLimit ?? 10))
    this.#latencyThresholdMs = options.latencyThresholdMs ?? Infinity
    this.#ratio = options.backoffRatio ?? 0.5
    if (!(this.#ratio > 0 && this.#ratio < 1)) {
      throw new SluiceError(
        'SLUICE_ERR_OPTION_INVALID',
        `AimdConcurrencyLimit: backoffRatio must be in (0, 1), received ${this.#ratio}`,
      )
    }
    this.#semaphore = new Semaphore({ limit: Math.floor(this.#limit), clock: options.clock })
  }

  /** The current limit (fractional while it grows). */
  get limit(): number {
    return this.#limit
  }
  get inUse(): number {
    return this.#semaphore.inUse
  }

  tryAcquire(): boolean {
    return this.#semaphore.tryAcquire(1)
  }

  acquire(options?: LimiterAcquireOptions): Promise<SlotRelease> {
    return this.#semaphore.acquire(1, options)
  }

  /** Reports how a slot's work went and gives the slot back. */
  complete(outcome: { ok: boolean; latencyMs?: number | undefined }): void {
    const congested = !outcome.ok || (outcome.latencyMs ?? 0) > this.#latencyThresholdMs
    this.#limit = congested
      ? Math.max(this.#min, this.#limit * this.#ratio)
      : Math.min(this.#max, this.#limit + 1 / this.#limit)
    this.#semaphore.setLimit(Math.floor(this.#limit))
    this.#semaphore.release(1)
  }
}
