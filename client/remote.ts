import type { Clock, DecidedMessage, DecideMessage, Timer } from '../shared/index.js'

/** The coordinator's answer to one remote check. */
export interface RemoteAnswer {
  /** The coordinator took the cost from what it holds of the key. */
  readonly admitted: boolean
  /** When asking again may succeed (Infinity: not by waiting; 0: unknown, e.g. no connection). */
  readonly retryAfterMs: number
  /** A keyed quota: the window whose budget an admitted check was taken from. */
  readonly window?: number | undefined
  /**
   * An admission: what the key has left after it, as the coordinator's part knows it (its part
   * plus what its lease says is left elsewhere, or its part scaled to the whole key: the HTTP
   * edge's `remaining: 'cluster'`); undefined when not decided there.
   */
  readonly remaining?: number | undefined
  /**
   * From the ask's last send to this answer, ms (undefined when not answered there): the
   * coordinator decided within it. The wait for a connection before it is not in it.
   */
  readonly roundTripMs?: number | undefined
}

/**
 * Frames of asks leave at most this many a second, sustained (the coordinator allows 1,000:
 * `maxDecideFramesPerSec`, bursts of twice that)...
 */
const framesPerSec = 500
/**
 * ...and up to this many at once after a quiet spell: an ask made while the pacer has room
 * leaves in the turn it was made, so a gateway that asks less than `framesPerSec` times a
 * second waits one round trip for each answer, no more (#41: a 2 ms gap between frames made
 * the median answer 1.6-2 ms where the round trip is 0.3 ms). Within the coordinator's budget
 * over any interval: at most 50 + 500·t frames against its 2,000 + 1,000·t.
 */
const frameBurst = 50

/** No connection, or too many asks in flight: refused here, at once, as a share would. */
const unanswered: RemoteAnswer = Object.freeze({ admitted: false, retryAfterMs: 0 })

/**
 * Remote decisions: checks a process could not decide by its own share, asked
 * of the coordinator (docs/protocol.md, `decide`). Asks made in one turn of
 * the event loop leave together (frames of at most maxEntries), at once
 * while a pacer of `framesPerSec` (bursts of `frameBurst`) has room, else when
 * it has: a gateway whose requests each come in a turn of their own sends at
 * most 500 frames a second, each with what was asked since the last (the
 * coordinator's budget is 1,000). Each
 * promise resolves with the answer naming its number, or refused when the
 * connection drops first (an ask is never retried: the coordinator may have
 * taken its cost). At most `maxInFlight` asks are out at once; more are
 * refused here at once.
 *
 * While no connection is up (`down`: a coordinator restarting, a cut), an ask waits for one,
 * until `waitMs` after the connection dropped (or after this was made, for the first): it
 * leaves once the coordinator welcomes the next connection (`up`), and is refused at that
 * deadline if none came. An ask made past it is refused at once, so a long outage costs each
 * request nothing but its refusal, and the asks waiting are bounded by `maxInFlight`. An ask that
 * waited so, refused by the coordinator that came back with a time to ask again that falls
 * before that deadline, is asked again then (a coordinator restarted starts its part's buckets
 * empty: a key's ask, made while it was away, is admitted as they refill, as a central limiter
 * that never went down would have admitted it); at most until the deadline.
 */
export class RemoteDecisions {
  readonly #send: (asks: DecideMessage['asks']) => void
  readonly #maxInFlight: number
  readonly #clock: Clock
  readonly #waitMs: number
  readonly #pending = new Map<number, (answer: RemoteAnswer) => void>()
  #queue: [number, string, number][] = []
  #next = 0
  #flushing = false
  #timer: Timer | undefined = undefined
  /** The pacer: frames that may leave now, as of `#pacedAtMs`. */
  #frames = frameBurst
  #pacedAtMs: number
  /** No connection up: asks wait (until `#waitUntilMs`) rather than leave. */
  #down = true
  #waitUntilMs: number
  #deadline: Timer | undefined = undefined
  /** Asks that waited for a connection: until when each may be asked again (`answered`). */
  readonly #waited = new Map<number, { untilMs: number; resource: string; cost: number }>()
  readonly #retries = new Set<Timer>()
  /** When each ask sent and not answered yet left (its last send). */
  readonly #sentAtMs = new Map<number, number>()

  constructor(
    send: (asks: DecideMessage['asks']) => void,
    maxInFlight: number,
    clock: Clock,
    waitMs = 0,
  ) {
    this.#send = send
    this.#maxInFlight = maxInFlight
    this.#clock = clock
    this.#waitMs = waitMs
    this.#pacedAtMs = clock.now()
    this.#waitUntilMs = clock.now() + waitMs
  }

  /** Asks in flight (sent or queued). */
  get inFlight(): number {
    return this.#pending.size
  }

  /** Asks the coordinator for `cost` of `resource` (a family's key id). */
  ask(resource: string, cost: number): Promise<RemoteAnswer> {
    if (this.#pending.size >= this.#maxInFlight) return Promise.resolve(unanswered)
    if (this.#down) {
      if (this.#clock.now() >= this.#waitUntilMs) return Promise.resolve(unanswered)
      this.#armDeadline()
    }
    const n = this.#next
    this.#next = (this.#next + 1) % Number.MAX_SAFE_INTEGER
    this.#queue.push([n, resource, cost])
    if (this.#down) this.#waited.set(n, { untilMs: this.#waitUntilMs, resource, cost })
    else this.#schedule()
    return new Promise((resolve) => this.#pending.set(n, resolve))
  }

  /** A flush of the queue, at once while the pacer has room, else when it has. */
  #schedule(): void {
    if (this.#flushing) return
    this.#flushing = true
    const waitMs = this.#paceMs()
    if (waitMs <= 0) queueMicrotask(() => this.#flush())
    else this.#timer = this.#clock.setTimeout(() => this.#flush(), waitMs)
  }

  /**
   * The coordinator welcomed a connection: the asks that waited for it leave (its hello and
   * holdings went first, on the same connection).
   */
  up(): void {
    this.#down = false
    this.#deadline?.cancel()
    this.#deadline = undefined
    if (this.#queue.length > 0) this.#schedule()
  }

  /**
   * The connection is gone: the asks sent on it are refused (their answers cannot come, and the
   * coordinator may have taken their cost); those not sent wait for the next connection, until
   * `waitMs` from now.
   */
  down(): void {
    this.#timer?.cancel()
    this.#timer = undefined
    this.#flushing = false
    if (!this.#down) {
      this.#down = true
      this.#waitUntilMs = this.#clock.now() + this.#waitMs
    }
    const waiting = new Set<number>()
    for (const [n, resource, cost] of this.#queue) {
      waiting.add(n)
      if (!this.#waited.has(n)) this.#waited.set(n, { untilMs: this.#waitUntilMs, resource, cost })
    }
    const sent: ((answer: RemoteAnswer) => void)[] = []
    for (const [n, resolve] of this.#pending)
      if (!waiting.has(n)) {
        this.#pending.delete(n)
        this.#waited.delete(n)
        this.#sentAtMs.delete(n)
        sent.push(resolve)
      }
    for (const resolve of sent) resolve(unanswered)
    if (this.#queue.length > 0) this.#armDeadline()
  }

  /** The asks waiting are refused at `#waitUntilMs` (now, when it is past). */
  #armDeadline(): void {
    if (this.#deadline !== undefined) return
    const inMs = this.#waitUntilMs - this.#clock.now()
    if (inMs <= 0) return this.#refuseWaiting()
    this.#deadline = this.#clock.setTimeout(() => this.#refuseWaiting(), inMs)
  }

  /** No connection came in time: the asks waiting for one are refused. */
  #refuseWaiting(): void {
    this.#deadline = undefined
    if (!this.#down) return
    const asks = this.#queue
    this.#queue = []
    for (const [n] of asks) {
      const resolve = this.#pending.get(n)
      this.#pending.delete(n)
      this.#waited.delete(n)
      resolve?.(unanswered)
    }
  }

  #flush(): void {
    this.#flushing = false
    this.#timer = undefined
    if (this.#down) return
    const asks = this.#queue
    this.#queue = []
    if (asks.length === 0) return
    this.#paceMs()
    this.#frames -= 1
    const nowMs = this.#clock.now()
    for (const [n] of asks) this.#sentAtMs.set(n, nowMs)
    this.#send(asks)
  }

  /** Refills the pacer; how long until a frame may leave (0: now). */
  #paceMs(): number {
    const nowMs = this.#clock.now()
    const earned = Math.max(0, nowMs - this.#pacedAtMs) * (framesPerSec / 1000)
    this.#frames = Math.min(frameBurst, this.#frames + earned)
    this.#pacedAtMs = nowMs
    return this.#frames >= 1 ? 0 : ((1 - this.#frames) * 1000) / framesPerSec
  }

  /** The coordinator's answers. An answer to no ask in flight (one from an old connection) is ignored. */
  answered(msg: DecidedMessage): void {
    for (const answer of msg.answers) {
      const [n, admitted, retryMs] = answer
      const resolve = this.#pending.get(n)
      if (resolve === undefined) continue
      const sentAtMs = this.#sentAtMs.get(n)
      this.#sentAtMs.delete(n)
      const waited = this.#waited.get(n)
      if (waited !== undefined) {
        if (admitted === 0 && retryMs >= 0 && this.#askAgain(n, waited, retryMs)) continue
        this.#waited.delete(n)
      }
      this.#pending.delete(n)
      const roundTripMs = sentAtMs === undefined ? undefined : this.#clock.now() - sentAtMs
      // An admission's third is what the key has left (docs/protocol.md), a refusal's its wait.
      resolve(
        answer.length === 4
          ? {
              admitted: true,
              retryAfterMs: 0,
              remaining: Math.max(0, retryMs),
              window: answer[3],
              roundTripMs,
            }
          : admitted === 1
            ? { admitted: true, retryAfterMs: 0, remaining: Math.max(0, retryMs), roundTripMs }
            : { admitted: false, retryAfterMs: retryMs < 0 ? Infinity : retryMs, roundTripMs },
      )
    }
  }

  /**
   * An ask that waited for a connection, refused with `retryMs`: asked again then, when that is
   * before its deadline (false: not, its refusal stands).
   */
  #askAgain(
    n: number,
    waited: { untilMs: number; resource: string; cost: number },
    retryMs: number,
  ): boolean {
    if (this.#clock.now() + retryMs >= waited.untilMs) return false
    const timer = this.#clock.setTimeout(() => {
      this.#retries.delete(timer)
      // Refused meanwhile (the connection dropped, the client closed): nothing to ask.
      if (!this.#pending.has(n)) return
      this.#queue.push([n, waited.resource, waited.cost])
      if (this.#down) this.#armDeadline()
      else this.#schedule()
    }, retryMs)
    this.#retries.add(timer)
    return true
  }

  /** The client closed: every ask in flight or waiting is refused (its answer cannot come). */
  dropAll(): void {
    for (const timer of this.#retries) timer.cancel()
    this.#retries.clear()
    this.#waited.clear()
    this.#sentAtMs.clear()
    this.#timer?.cancel()
    this.#timer = undefined
    this.#deadline?.cancel()
    this.#deadline = undefined
    this.#flushing = false
    this.#down = true
    this.#waitUntilMs = -Infinity
    this.#queue = []
    const pending = [...this.#pending.values()]
    this.#pending.clear()
    for (const resolve of pending) resolve(unanswered)
  }
}
