import { nextTurn } from '../../shared/index.js'

/**
 * Turns of the event loop, as the sessions need them: a number that moves on
 * from one turn to the next, and work put off to the next turn. At most one
 * `setImmediate` a turn, and only in turns where a frame arrived.
 */
export class Turns {
  #turn = 0
  #scheduled = false
  #waiting: (() => void)[] = []
  readonly #next: (callback: () => void) => void

  constructor(next: (callback: () => void) => void = nextTurn) {
    this.#next = next
  }

  /** This turn's number; the next turn's differs. */
  get now(): number {
    this.#schedule()
    return this.#turn
  }

  /** Runs `callback` at the next turn (after the I/O that turn brings). */
  later(callback: () => void): void {
    this.#waiting.push(callback)
    this.#schedule()
  }

  #schedule(): void {
    if (this.#scheduled) return
    this.#scheduled = true
    this.#next(() => {
      this.#scheduled = false
      this.#turn++
      const waiting = this.#waiting
      this.#waiting = []
      for (const callback of waiting) callback()
    })
  }
}
