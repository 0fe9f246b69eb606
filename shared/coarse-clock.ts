import type { Clock, Timer } from './clock.js'

/** Ticks without a read before the coarse clock stops its timer. */
const idleTicks = 1000
/** Readings remembered (a power of two): 4 s of ticks at 1 ms. */
const keptTicks = 4096

/**
 * A clock for hot paths: `now()` returns a cached reading of `source`,
 * refreshed every `resolutionMs` by one timer, so a check costs a field read
 * instead of a system call. The reading lags real time (by up to a tick, more
 * when the event loop is late) and never leads it: it is always something
 * `source.now()` returned earlier. What a reader does while `now()` returns
 * one reading happens, in real time, between that reading and the next one
 * (the next tick), so readers that meter by time (TokenBucket) ask for the
 * reading after theirs (`readingAfter`) and assume the worst within that
 * span: a late timer makes them admit less, never more.
 *
 * When nobody reads it for `idleTicks` ticks the timer stops (a quiet
 * process does not wake 1000 times a second); the next read takes a fresh
 * reading from `source` and starts it again.
 */
export class CoarseClock implements Clock {
  readonly resolutionMs: number
  readonly #source: Clock
  #nowMs: number
  /** Recent readings by index (a ring), and how many were taken. */
  readonly #readings = new Float64Array(keptTicks)
  #count = 0
  #timer: Timer | undefined
  #read = false
  #quietTicks = 0
  #closed = false

  constructor(source: Clock, resolutionMs = 1) {
    this.#source = source
    this.resolutionMs = resolutionMs
    this.#nowMs = source.now()
    this.#record()
    this.#start()
  }

  now(): number {
    if (this.#timer === undefined) return this.#wake()
    this.#read = true
    return this.#nowMs
  }

  /** The index of the reading `now()` returns. */
  get readingIndex(): number {
    return this.#count - 1
  }

  /** A fresh reading of the source, not cached (for what must know the real time: a decay). */
  preciseNow(): number {
    return this.#source.now()
  }

  /**
   * When the reading after reading `index` was taken: the latest real time
   * anything done at reading `index` can have happened. Past what is
   * remembered, the oldest remembered (later than the truth: safe).
   */
  readingAfter(index: number): number {
    const next = index + 1
    if (next >= this.#count) return this.#nowMs
    const oldest = this.#count - keptTicks
    return this.#readings[(next < oldest ? oldest : next) & (keptTicks - 1)]!
  }

  /** Takes a fresh reading (the timer calls it; tests call it to model any lateness). */
  tick(): void {
    const now = this.#source.now()
    // Readings strictly increase: a reader's reading is known by its value.
    if (now > this.#nowMs) {
      this.#nowMs = now
      this.#record()
    }
    if (this.#read) {
      this.#read = false
      this.#quietTicks = 0
    } else if (++this.#quietTicks >= idleTicks) this.#stop()
  }

  /** Whether the timer runs (false while idle or closed). */
  get running(): boolean {
    return this.#timer !== undefined
  }

  wallNow(): number {
    return this.#source.wallNow()
  }

  setTimeout(callback: () => void, delayMs: number): Timer {
    return this.#source.setTimeout(callback, delayMs)
  }

  setInterval(callback: () => void, periodMs: number): Timer {
    return this.#source.setInterval(callback, periodMs)
  }

  /** Stops the timer for good; `now()` then reads the source each time. */
  close(): void {
    this.#closed = true
    this.#stop()
  }

  #wake(): number {
    const now = this.#source.now()
    if (now > this.#nowMs) {
      this.#nowMs = now
      this.#record()
    }
    if (!this.#closed) this.#start()
    return this.#nowMs
  }

  #record(): void {
    this.#readings[this.#count & (keptTicks - 1)] = this.#nowMs
    this.#count++
  }

  #start(): void {
    this.#read = true
    this.#quietTicks = 0
    this.#timer = this.#source.setInterval(() => this.tick(), this.resolutionMs).unref()
  }

  #stop(): void {
    this.#timer?.cancel()
    this.#timer = undefined
  }
}

let shared: CoarseClock | undefined

/**
 * The process's coarse clock over `systemClock`: one timer for every client
 * in the process (it stops by itself when nothing reads it). Never closed.
 */
export function sharedCoarseClock(source: Clock): CoarseClock {
  shared ??= new CoarseClock(source)
  return shared
}

/**
 * The real time now on `clock`: a coarse clock's source, not its lagging reading. What must not
 * happen early (a window's start) is placed from this; what must not happen late (an end), from
 * the reading.
 */
export function preciseNow(clock: Clock): number {
  return clock instanceof CoarseClock ? clock.preciseNow() : clock.now()
}
