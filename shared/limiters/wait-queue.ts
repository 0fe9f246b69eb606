import type { Clock, Timer } from '../clock.js'
import { SluiceError } from '../errors.js'
import { Fifo } from './fifo.js'

export interface WaitOptions {
  readonly signal?: AbortSignal | undefined
  /** Give up (SLUICE_ERR_CLIENT_TIMEOUT) after this long. */
  readonly maxWaitMs?: number | undefined
}

interface Waiter<T> {
  readonly cost: number
  readonly resolve: (value: T) => void
  readonly reject: (error: SluiceError) => void
  timer: Timer | undefined
  signal: AbortSignal | undefined
  onAbort: (() => void) | undefined
}

/**
 * Callers waiting for capacity, in FIFO order, bounded, each cancellable by
 * an AbortSignal and by a timeout on the injected clock. The owner says
 * when capacity may have appeared (`serve`); `onDrop` tells the owner a
 * waiter left early, so the next one may be served.
 */
export class WaitQueue<T> {
  readonly #waiters = new Fifo<Waiter<T>>()
  readonly #clock: Clock
  readonly #maxWaiters: number
  readonly #onDrop: () => void
  readonly #onGiveUp: ((cost: number) => void) | undefined

  /** `onGiveUp`: a caller was not admitted (timed out, aborted, or the queue was full), for usage counts. */
  constructor(
    clock: Clock,
    maxWaiters: number,
    onDrop: () => void,
    onGiveUp?: (cost: number) => void,
  ) {
    this.#clock = clock
    this.#maxWaiters = maxWaiters
    this.#onDrop = onDrop
    this.#onGiveUp = onGiveUp
  }

  get length(): number {
    return this.#waiters.length
  }

  /** Cost of the first waiter, if any. */
  headCost(): number | undefined {
    return this.#waiters.peek()?.cost
  }

  /** Total cost waiting. */
  totalCost(): number {
    let sum = 0
    for (const w of this.#waiters) sum += w.cost
    return sum
  }

  /** Queues a caller; rejects at once when aborted already or when the queue is full. */
  enqueue(cost: number, options: WaitOptions, what: string): Promise<T> {
    if (options.signal?.aborted === true) {
      this.#onGiveUp?.(cost)
      return Promise.reject(new SluiceError('SLUICE_ERR_CLIENT_ABORTED', what))
    }
    if (this.#waiters.length >= this.#maxWaiters) {
      this.#onGiveUp?.(cost)
      return Promise.reject(
        new SluiceError(
          'SLUICE_ERR_CLIENT_QUEUE_FULL',
          `${what}: ${this.#maxWaiters} callers already wait`,
        ),
      )
    }
    return new Promise<T>((resolve, reject) => {
      const waiter: Waiter<T> = {
        cost,
        resolve,
        reject,
        timer: undefined,
        signal: options.signal,
        onAbort: undefined,
      }
      if (options.maxWaitMs !== undefined) {
        waiter.timer = this.#clock.setTimeout(
          () =>
            this.#drop(
              waiter,
              'SLUICE_ERR_CLIENT_TIMEOUT',
              `${what}: waited ${options.maxWaitMs} ms`,
            ),
          options.maxWaitMs,
        )
      }
      if (options.signal !== undefined) {
        waiter.onAbort = () => this.#drop(waiter, 'SLUICE_ERR_CLIENT_ABORTED', what)
        options.signal.addEventListener('abort', waiter.onAbort, { once: true })
      }
      this.#waiters.push(waiter)
    })
  }

  /** Resolves waiters in order while `admit(cost)` takes their cost. */
  serve(admit: (cost: number) => boolean, value: (cost: number) => T): void {
    for (
      let head = this.#waiters.peek();
      head !== undefined && admit(head.cost);
      head = this.#waiters.peek()
    ) {
      this.#waiters.shift()
      this.#cleanup(head)
      head.resolve(value(head.cost))
    }
  }

  /** Rejects every waiter (on close). */
  rejectAll(code: 'SLUICE_ERR_CLIENT_CLOSED', detail: string): void {
    for (let w = this.#waiters.shift(); w !== undefined; w = this.#waiters.shift()) {
      this.#cleanup(w)
      w.reject(new SluiceError(code, detail))
    }
  }

  #drop(
    waiter: Waiter<T>,
    code: 'SLUICE_ERR_CLIENT_TIMEOUT' | 'SLUICE_ERR_CLIENT_ABORTED',
    detail: string,
  ): void {
    if (!this.#waiters.remove(waiter)) return
    this.#cleanup(waiter)
    this.#onGiveUp?.(waiter.cost)
    waiter.reject(new SluiceError(code, detail))
    this.#onDrop()
  }

  #cleanup(waiter: Waiter<T>): void {
    waiter.timer?.cancel()
    if (waiter.onAbort !== undefined) waiter.signal?.removeEventListener('abort', waiter.onAbort)
  }
}
