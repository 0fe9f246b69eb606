import { SluiceError, describeValue, type Clock, type Timer } from '../../shared/index.js'
import { Fifo } from '../fifo.js'

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
}

interface Waiter {
  readonly cost: number
  readonly resolve: () => void
  readonly reject: (e: SluiceError) => void
  timer: Timer | undefined
  signal: AbortSignal | undefined
  onAbort: (() => void) | undefined
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
  readonly #waiters = new Fifo<Waiter>()
  readonly #maxWaiters: number
  #timer: Timer | undefined

  /** `maxWaiters`: most callers waiting in `acquire` at once (SLUICE_ERR_CLIENT_QUEUE_FULL beyond). */
  constructor(clock: Clock, maxWaiters = 10_000) {
    this.clock = clock
    this.#maxWaiters = maxWaiters
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
    if (options.signal?.aborted === true)
      return Promise.reject(new SluiceError('SLUICE_ERR_CLIENT_ABORTED', 'acquire'))
    if (this.#waiters.length >= this.#maxWaiters) {
      return Promise.reject(
        new SluiceError('SLUICE_ERR_CLIENT_QUEUE_FULL', `${this.#maxWaiters} callers already wait`),
      )
    }
    return new Promise<void>((resolve, reject) => {
      const waiter: Waiter = {
        cost,
        resolve,
        reject,
        timer: undefined,
        signal: options.signal,
        onAbort: undefined,
      }
      if (options.maxWaitMs !== undefined) {
        waiter.timer = this.clock.setTimeout(
          () => this.#drop(waiter, 'SLUICE_ERR_CLIENT_TIMEOUT'),
          options.maxWaitMs,
        )
      }
      if (options.signal !== undefined) {
        waiter.onAbort = () => this.#drop(waiter, 'SLUICE_ERR_CLIENT_ABORTED')
        options.signal.addEventListener('abort', waiter.onAbort, { once: true })
      }
      this.#waiters.push(waiter)
      this.serve()
    })
  }

  /** Admits waiters in order while allowed; arms one timer for the head otherwise. */
  protected serve(): void {
    for (
      let head = this.#waiters.peek();
      head !== undefined && this.take(head.cost);
      head = this.#waiters.peek()
    ) {
      this.#waiters.shift()
      this.#cleanup(head)
      head.resolve()
    }
    this.#timer?.cancel()
    this.#timer = undefined
    const head = this.#waiters.peek()
    if (head === undefined) return
    const waitMs = this.msUntil(head.cost)
    if (Number.isFinite(waitMs))
      this.#timer = this.clock.setTimeout(() => this.serve(), Math.max(1, Math.ceil(waitMs)))
  }

  #drop(waiter: Waiter, code: 'SLUICE_ERR_CLIENT_TIMEOUT' | 'SLUICE_ERR_CLIENT_ABORTED'): void {
    if (!this.#waiters.remove(waiter)) return
    this.#cleanup(waiter)
    waiter.reject(new SluiceError(code, 'acquire'))
    this.serve()
  }

  #cleanup(waiter: Waiter): void {
    waiter.timer?.cancel()
    if (waiter.onAbort !== undefined) waiter.signal?.removeEventListener('abort', waiter.onAbort)
  }
}
