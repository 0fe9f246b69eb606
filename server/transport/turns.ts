import { nextTurn, systemClock, type Clock } from '../../shared/index.js'
import { Fifo } from '../../shared/limiters/index.js'

/** A connection with frames waiting, as the turns serve it (WsSession). */
export interface TurnWaiter {
  /** Its tenant (undefined: none, or no hello yet): tenants are served in turn, then connections. */
  readonly tenant: string | undefined
  /**
   * Handles its oldest waiting frame if `turns.mayHandle()`. Returns `more`
   * (frames still wait), `done` (none wait), or `full` (the turn had no room
   * left: it is served first at the next).
   */
  serveOne(): 'more' | 'done' | 'full'
}

/**
 * How long the frames of all connections together may take of one turn of the event loop,
 * ms: past it, frames wait for the next turn. A turn's first frame is always handled.
 */
export const turnBudgetMs = 5

/** A tenant's connections with frames waiting, served in turn. */
interface TenantQueue {
  readonly tenant: string | undefined
  readonly waiters: Fifo<TurnWaiter>
}

/**
 * Turns of the event loop, shared out between the connections: frames are
 * handled for at most `turnBudgetMs` of a turn, all connections together,
 * so a turn stays short however many connections flood, and timers and I/O
 * (a ledger write's steps, one per turn) are not held back. Connections with
 * frames waiting are served one frame at a time at the turns after, round
 * robin by tenant, then by connection within a tenant: a frame waits behind
 * at most one frame of each other tenant, however many connections that
 * tenant opened. At most one `setImmediate` a turn, and only in turns where
 * a frame came.
 */
export class Turns {
  #turn = 0
  /** When this turn's first frame was handled; undefined: none yet. */
  #startedMs: number | undefined = undefined
  #scheduled = false
  /** Tenants with connections whose frames wait, in the order they are served. */
  readonly #tenants = new Fifo<TenantQueue>()
  /** The queue of each tenant in `#tenants`. */
  readonly #queues = new Map<string | undefined, TenantQueue>()
  #waiting = 0
  readonly #clock: Clock
  readonly #budgetMs: number
  readonly #next: (callback: () => void) => void

  /**
   * `clock` times the event loop's turns: the real one, even where the coordinator's protocol
   * runs on a manual clock (tests).
   */
  constructor(clock: Clock = systemClock, budgetMs = turnBudgetMs, next = nextTurn) {
    this.#clock = clock
    this.#budgetMs = budgetMs
    this.#next = next
  }

  /** This turn's number; the next turn's differs. */
  get now(): number {
    return this.#turn
  }

  /** How many connections have frames waiting. */
  get waiting(): number {
    return this.#waiting
  }

  /** Whether a frame may be handled in what is left of this turn. */
  mayHandle(): boolean {
    const started = this.#startedMs
    if (started !== undefined) return this.#clock.now() - started < this.#budgetMs
    this.#startedMs = this.#clock.now()
    // A turn that handled anything is followed by a fresh one.
    this.#schedule()
    return true
  }

  /** `waiter` has frames waiting: it is served at the next turns, after those already waiting. */
  wait(waiter: TurnWaiter): void {
    let queue = this.#queues.get(waiter.tenant)
    if (queue === undefined) {
      queue = { tenant: waiter.tenant, waiters: new Fifo() }
      this.#queues.set(waiter.tenant, queue)
      this.#tenants.push(queue)
    }
    queue.waiters.push(waiter)
    this.#waiting++
    this.#schedule()
  }

  #schedule(): void {
    if (this.#scheduled) return
    this.#scheduled = true
    this.#next(() => this.#run())
  }

  #run(): void {
    this.#scheduled = false
    this.#turn++
    this.#startedMs = undefined
    for (;;) {
      const queue = this.#tenants.peek()
      if (queue === undefined) break
      const waiter = queue.waiters.peek()!
      const served = waiter.serveOne()
      if (served === 'full') break
      queue.waiters.shift()
      if (served === 'more') queue.waiters.push(waiter)
      else this.#waiting--
      // The tenant goes behind the others, or leaves the round with nothing waiting.
      this.#tenants.shift()
      if (queue.waiters.length > 0) this.#tenants.push(queue)
      else this.#queues.delete(queue.tenant)
    }
    if (this.waiting > 0) this.#schedule()
  }
}
