import { nextTurn, systemClock, type Clock } from '../../shared/index.js'

/** A connection with frames waiting, as the turns serve it (WsSession). */
export interface TurnWaiter {
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

/**
 * Turns of the event loop, shared out between the connections: frames are
 * handled for at most `turnBudgetMs` of a turn, all connections together,
 * so a turn stays short however many connections flood, and timers and I/O
 * (a ledger write's steps, one per turn) are not held back. Connections with
 * frames waiting are served one frame at a time, round robin, at the turns
 * after: a frame waits behind at most one frame of each other connection.
 * At most one `setImmediate` a turn, and only in turns where a frame came.
 */
export class Turns {
  #turn = 0
  /** When this turn's first frame was handled; undefined: none yet. */
  #startedMs: number | undefined = undefined
  #scheduled = false
  /** Connections with frames waiting, in the order they are served: `#ready[#head..]`. */
  #ready: TurnWaiter[] = []
  #head = 0
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
    return this.#ready.length - this.#head
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
    this.#ready.push(waiter)
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
    const ready = this.#ready
    while (this.#head < ready.length) {
      const waiter = ready[this.#head]!
      const served = waiter.serveOne()
      if (served === 'full') break
      this.#head++
      if (served === 'more') ready.push(waiter)
    }
    // Served entries are dropped once they are half the array (amortised O(1) a frame).
    if (this.#head === ready.length) {
      ready.length = 0
      this.#head = 0
    } else if (this.#head > 64 && this.#head * 2 > ready.length) {
      this.#ready = ready.slice(this.#head)
      this.#head = 0
    }
    if (this.waiting > 0) this.#schedule()
  }
}
