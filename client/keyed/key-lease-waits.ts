import type { Clock, Timer } from '../../shared/index.js'

/**
 * How long a check of a rate key on the default share, which its part here cannot decide, waits
 * for the key's first own lease (client/keyed/family.ts `#keyMoveWaitMs`), and then, when that
 * lease says a rise is coming, for the rise: its early report goes at once, the coordinator
 * makes the key hot and sends its seeds, the holders that never asked for the key say so, and
 * their falls and the rise follow, each a round trip and a ledger write (a customer's 105
 * requests at once at one gateway of three, loopback: all answered in 30-47 ms). Past it (the
 * early reports of the period spent, a slow disk, other holders that asked for the key and keep
 * their seeds until their next report), the check is decided as before.
 */
export const keyMoveFirstWaitMs = 250

interface KeyLeaseWaiter {
  readonly key: string
  readonly timer: Timer
  readonly resolve: () => void
}

/**
 * Checks waiting for a key's own lease: the coordinator's part (server/coordinator/central.ts)
 * asked for a key it holds nothing of, whose budget the coordinator may lease it (what no
 * process holds of a keyed quota's key: the room kept for one process more); or a process's
 * check of a rate key its part cannot decide while the key may be moving to it (its first own
 * lease to come, or a rise that lease said is coming: family.ts `#keyMoveWaitMs`). The refusal
 * asks for the key (an early report); each check waits for that key's next lease (`wake`, in a
 * microtask, so after the whole batch that brought it) or `maxWaitMs`, then is decided as any
 * check then. Bounded: past `maxWaiting` a check is not held (`wait` says so; the caller
 * refuses it, as before).
 */
export class KeyLeaseWaits {
  readonly #clock: Clock
  readonly #maxWaiting: number
  readonly #byKey = new Map<string, Set<KeyLeaseWaiter>>()
  #size = 0

  constructor(clock: Clock, maxWaiting: number) {
    this.#clock = clock
    this.#maxWaiting = maxWaiting
  }

  /** Checks waiting now. */
  get size(): number {
    return this.#size
  }

  /** Resolves at `key`'s next lease, or in `maxWaitMs`; undefined when no more may wait. */
  wait(key: string, maxWaitMs: number): Promise<void> | undefined {
    if (this.#size >= this.#maxWaiting) return undefined
    return new Promise<void>((resolve) => {
      const waiter: KeyLeaseWaiter = {
        key,
        timer: this.#clock.setTimeout(() => this.#settle(waiter), maxWaitMs).unref(),
        resolve,
      }
      let waiters = this.#byKey.get(key)
      if (waiters === undefined) this.#byKey.set(key, (waiters = new Set()))
      waiters.add(waiter)
      this.#size++
    })
  }

  /** A lease of `key` came: its waiters are settled in a microtask (after the rest of the batch). */
  wake(key: string): void {
    const waiters = this.#byKey.get(key)
    if (waiters === undefined) return
    queueMicrotask(() => {
      for (const waiter of [...waiters]) this.#settle(waiter)
    })
  }

  /**
   * The family's first share came (the coordinator's part, just made, held nothing): every
   * waiter is settled in a microtask (after the rest of the batch), each decided with it.
   */
  wakeAll(): void {
    if (this.#size === 0) return
    queueMicrotask(() => this.settleAll())
  }

  /** The family closes: every waiter is settled at once. */
  settleAll(): void {
    for (const waiters of [...this.#byKey.values()])
      for (const waiter of [...waiters]) this.#settle(waiter)
  }

  #settle(waiter: KeyLeaseWaiter): void {
    const waiters = this.#byKey.get(waiter.key)
    if (waiters === undefined || !waiters.delete(waiter)) return
    if (waiters.size === 0) this.#byKey.delete(waiter.key)
    this.#size--
    waiter.timer.cancel()
    waiter.resolve()
  }
}
