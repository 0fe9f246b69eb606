import type { Clock, DecidedMessage, DecideMessage, Timer } from '../shared/index.js'

/** The coordinator's answer to one remote check. */
export interface RemoteAnswer {
  /** The coordinator took the cost from what it holds of the key. */
  readonly admitted: boolean
  /** When asking again may succeed (Infinity: not by waiting; 0: unknown, e.g. no connection). */
  readonly retryAfterMs: number
  /** A keyed quota: the window whose budget an admitted check was taken from. */
  readonly window?: number | undefined
}

/** Frames of asks leave at least this far apart (at most 500 a second). */
const minFrameGapMs = 2

/** No connection, or too many asks in flight: refused here, at once, as a share would. */
const unanswered: RemoteAnswer = Object.freeze({ admitted: false, retryAfterMs: 0 })

/**
 * Remote decisions: checks a process could not decide by its own share, asked
 * of the coordinator (docs/protocol.md, `decide`). Asks made in one turn of
 * the event loop leave together (frames of at most maxEntries), and frames
 * leave `minFrameGapMs` apart at the closest: a gateway whose requests each
 * come in a turn of their own sends at most 500 frames a second, each with
 * what was asked since the last (the coordinator's budget is 1,000). Each
 * promise resolves with the answer naming its number, or refused when the
 * connection drops first (an ask is never retried: the request it stands
 * for is waiting). At most `maxInFlight` asks are out at once; more are
 * refused here at once.
 */
export class RemoteDecisions {
  readonly #send: (asks: DecideMessage['asks']) => void
  readonly #maxInFlight: number
  readonly #clock: Clock
  readonly #pending = new Map<number, (answer: RemoteAnswer) => void>()
  #queue: [number, string, number][] = []
  #next = 0
  #flushing = false
  #timer: Timer | undefined = undefined
  #lastSentMs = -Infinity

  constructor(send: (asks: DecideMessage['asks']) => void, maxInFlight: number, clock: Clock) {
    this.#send = send
    this.#maxInFlight = maxInFlight
    this.#clock = clock
  }

  /** Asks in flight (sent or queued). */
  get inFlight(): number {
    return this.#pending.size
  }

  /** Asks the coordinator for `cost` of `resource` (a family's key id). */
  ask(resource: string, cost: number): Promise<RemoteAnswer> {
    if (this.#pending.size >= this.#maxInFlight) return Promise.resolve(unanswered)
    const n = this.#next
    this.#next = (this.#next + 1) % Number.MAX_SAFE_INTEGER
    this.#queue.push([n, resource, cost])
    if (!this.#flushing) {
      this.#flushing = true
      const waitMs = this.#lastSentMs + minFrameGapMs - this.#clock.now()
      if (waitMs <= 0) queueMicrotask(() => this.#flush())
      else this.#timer = this.#clock.setTimeout(() => this.#flush(), waitMs)
    }
    return new Promise((resolve) => this.#pending.set(n, resolve))
  }

  #flush(): void {
    this.#flushing = false
    this.#timer = undefined
    const asks = this.#queue
    this.#queue = []
    if (asks.length === 0) return
    this.#lastSentMs = this.#clock.now()
    this.#send(asks)
  }

  /** The coordinator's answers. An answer to no ask in flight (one from an old connection) is ignored. */
  answered(msg: DecidedMessage): void {
    for (const answer of msg.answers) {
      const [n, admitted, retryMs] = answer
      const resolve = this.#pending.get(n)
      if (resolve === undefined) continue
      this.#pending.delete(n)
      const retryAfterMs = retryMs < 0 ? Infinity : retryMs
      resolve(
        answer.length === 4
          ? { admitted: true, retryAfterMs, window: answer[3] }
          : { admitted: admitted === 1, retryAfterMs },
      )
    }
  }

  /** The connection is gone: every ask in flight is refused (its answer cannot come). */
  dropAll(): void {
    this.#timer?.cancel()
    this.#timer = undefined
    this.#flushing = false
    this.#queue = []
    const pending = [...this.#pending.values()]
    this.#pending.clear()
    for (const resolve of pending) resolve(unanswered)
  }
}
