import type { Clock, Timer } from '../../shared/index.js'
import type { RemoteAnswer } from '../remote.js'

interface EdgeWaiter {
  readonly timer: Timer
  readonly resolve: (answer: RemoteAnswer | Promise<RemoteAnswer>) => void
  readonly decideNow: () => RemoteAnswer | Promise<RemoteAnswer>
}

/**
 * Checks that may wait a round trip (`decide`, `check`, the HTTP edge) for the family's next
 * lease, then are decided as any check then: made at a keyed quota window's edge (the window
 * over here by time, the next window's lease not come yet: it comes with the coordinator's
 * round at the edge, a round trip after it), rather than refused for a budget nobody spent; or
 * while the family's lease of 0 says a share is rising to it (client/rise.ts), rather than
 * refused for a share on its way. Each waits for that lease (`wake`, once the batch that
 * brought it is applied whole) or `maxWaitMs`. Bounded: past `maxWaiting`, a check is not held
 * (`hasRoom`; the caller decides it at once, as before).
 */
export class NextLeaseWaits {
  readonly #clock: Clock
  readonly #maxWaiting: number
  readonly #waiting = new Set<EdgeWaiter>()
  #waking = false

  constructor(clock: Clock, maxWaiting: number) {
    this.#clock = clock
    this.#maxWaiting = maxWaiting
  }

  /** Whether another check may wait. */
  get hasRoom(): boolean {
    return this.#waiting.size < this.#maxWaiting
  }

  /** Waits for a wake past the edge, or `maxWaitMs`; then answers what `decideNow` says. */
  wait(
    maxWaitMs: number,
    decideNow: () => RemoteAnswer | Promise<RemoteAnswer>,
  ): Promise<RemoteAnswer> {
    return new Promise<RemoteAnswer>((resolve) => {
      const waiter: EdgeWaiter = {
        timer: this.#clock.setTimeout(() => this.#settle(waiter), maxWaitMs).unref(),
        resolve,
        decideNow,
      }
      this.#waiting.add(waiter)
    })
  }

  /**
   * A family lease came: unless `stillWaits()` holds (still at the edge, still rising), the waiting checks are decided, in a
   * microtask, so after every lease of the batch that brought it (a key leased on its own in
   * the new window comes in the same batch, after the family's lease: decided before it, such
   * a key would take the new window's default share).
   */
  wake(stillWaits: () => boolean): void {
    if (this.#waking || this.#waiting.size === 0) return
    this.#waking = true
    queueMicrotask(() => {
      this.#waking = false
      if (stillWaits()) return
      for (const waiter of [...this.#waiting]) this.#settle(waiter)
    })
  }

  /** The family closes: every waiting check gets `answer` at once. */
  answerAll(answer: RemoteAnswer): void {
    for (const waiter of [...this.#waiting]) {
      this.#waiting.delete(waiter)
      waiter.timer.cancel()
      waiter.resolve(answer)
    }
  }

  #settle(waiter: EdgeWaiter): void {
    if (!this.#waiting.delete(waiter)) return
    waiter.timer.cancel()
    waiter.resolve(waiter.decideNow())
  }
}
