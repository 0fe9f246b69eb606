import type { Clock, Timer } from '../clock.js'
import { SluiceError, describeValue } from '../errors.js'
import { WaitQueue } from './wait-queue.js'

export interface LimiterAcquireOptions {
  readonly signal?: AbortSignal | undefined
  /** Give up (SLUICE_ERR_CLIENT_TIMEOUT) after this long; default: wait as long as it takes. */
  readonly maxWaitMs?: number | undefined
}

/** The surface every local limiter shares. */
export interface Limiter {
  /** Takes `cost` now if allowed (police). Never waits; never jumps ahead of waiting callers. */
  tryAcquire(cost?: number): boolean
  /** Waits in FIFO order until `cost` is allowed (shape). */
  acquire(cost?: number, options?: LimiterAcquireOptions): Promise<void>
  /** Milliseconds until `cost` would be allowed: 0 now, Infinity never. */
  msUntil(cost?: number): number
  /** Whole tokens that could be taken now, where the limiter can tell cheaply. */
  remaining?(): number
  /** What it admits, where it can say: a sustained rate and the most at once (for headers). */
  describe?(): LimiterShape
  /** Milliseconds until it is back to its full quota (the headers' reset). */
  msUntilReset?(): number
  /** Gives back `cost` taken earlier, for a request that turned out not to count. */
  refund?(cost: number): void
  /**
   * `remaining()` and `msUntilReset()` as they stood at the limiter's last
   * clock reading, read without a new one: right after a `tryAcquire` that
   * took, the state that take left (for its response's header fields; two
   * clock reads fewer per request).
   */
  remainingAtLastReading?(): number
  msUntilResetAtLastReading?(): number
}

/** A limiter's quota: `ratePerSec` sustained, at most `burst` at once. */
export interface LimiterShape {
  readonly ratePerSec: number
  readonly burst: number
}

/** Checks a numeric option once, naming it, the rule and the value. */
export function positiveOption(
  owner: string,
  name: string,
  value: unknown,
  allowZero = false,
): number {
  if (
    typeof value !== 'number' ||
    !Number.isFinite(value) ||
    value < 0 ||
    (!allowZero && value === 0)
  ) {
    throw new SluiceError(
      'SLUICE_ERR_OPTION_INVALID',
      `${owner}: ${name} must be a finite number ${allowZero ? '≥' : '>'} 0, received ${describeValue(value)}`,
    )
  }
  return value
}

/**
 * The shared shell of the local limiters: subclasses say whether `cost` can
 * be taken now (`take`) and how long until it can (`msUntil`); this class adds
 * the FIFO `acquire` on one re-armed timer, with abort and timeout.
 */
export abstract class BaseLimiter implements Limiter {
  protected readonly clock: Clock
  readonly #waiters: WaitQueue<void>
  #timer: Timer | undefined
  readonly #take = (cost: number): boolean => this.take(cost)
  readonly #nothing = (): void => undefined

  /** `maxWaiters`: most callers waiting in `acquire` at once (SLUICE_ERR_CLIENT_QUEUE_FULL beyond). */
  constructor(clock: Clock, maxWaiters = 10_000) {
    this.clock = clock
    this.#waiters = new WaitQueue<void>(clock, maxWaiters, () => this.serve())
  }

  /** Callers waiting in `acquire`. */
  get waiting(): number {
    return this.#waiters.length
  }

  /** Takes `cost` if allowed now; no side effect when not. */
  protected abstract take(cost: number): boolean
  abstract msUntil(cost?: number): number

  tryAcquire(cost = 1): boolean {
    return this.#waiters.length === 0 && this.take(cost)
  }

  acquire(cost = 1, options: LimiterAcquireOptions = {}): Promise<void> {
    if (this.#waiters.length === 0 && this.take(cost)) return Promise.resolve()
    if (this.msUntil(cost) === Infinity) {
      return Promise.reject(
        new SluiceError(
          'SLUICE_ERR_LIMITER_COST_TOO_HIGH',
          `cost ${cost} can never be admitted by this limiter`,
        ),
      )
    }
    const waiting = this.#waiters.enqueue(cost, options, 'acquire')
    this.serve()
    return waiting
  }

  /** Admits waiters in order while allowed; arms one timer for the head otherwise. */
  protected serve(): void {
    this.#waiters.serve(this.#take, this.#nothing)
    this.#timer?.cancel()
    this.#timer = undefined
    const cost = this.#waiters.headCost()
    if (cost === undefined) return
    const waitMs = this.msUntil(cost)
    if (Number.isFinite(waitMs))
      this.#timer = this.clock.setTimeout(() => this.serve(), Math.max(1, Math.ceil(waitMs)))
  }
}
