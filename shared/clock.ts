/**
 * Time is injected. This file is the only one allowed to read the ambient
 * clock or to arm real timers (lint enforces it); everything else takes a
 * `Clock`, so tests drive time with a `ManualClock` and never sleep.
 */

/** A scheduled callback. `cancel()` is idempotent. */
export interface Timer {
  cancel(): void
  /** Lets the process exit while this timer is pending (no-op on a manual clock). */
  unref(): Timer
}

export interface Clock {
  /** Monotonic milliseconds since an arbitrary origin; never goes back. */
  now(): number

  /** Wall-clock milliseconds since the epoch, for log and display stamps only. */
  wallNow(): number
  /** Runs `callback` once after `delayMs` (clamped to ≥ 0). */
  setTimeout(callback: () => void, delayMs: number): Timer
  /** Runs `callback` every `periodMs` (clamped to ≥ 1) until cancelled. */
  setInterval(callback: () => void, periodMs: number): Timer
}

/**
 * Runs `callback` at the event loop's next turn, after the I/O of this one:
 * not time (a manual clock does not hold it back), the loop's order. For
 * work that must let other connections' frames in first (server/transport/turns.ts).
 */
export function nextTurn(callback: () => void): void {
  setImmediate(callback)
}

class SystemTimer implements Timer {
  readonly #handle: NodeJS.Timeout
  readonly #interval: boolean
  constructor(handle: NodeJS.Timeout, interval: boolean) {
    this.#handle = handle
    this.#interval = interval
  }
  cancel(): void {
    if (this.#interval) clearInterval(this.#handle)
    else clearTimeout(this.#handle)
  }
  unref(): Timer {
    this.#handle.unref()
    return this
  }
}

/** The real clock: `performance.now()` and Node's timers. */
export const systemClock: Clock = Object.freeze({
  now: () => performance.now(),
  wallNow: () => Date.now(),
  setTimeout: (callback: () => void, delayMs: number): Timer =>
    new SystemTimer(setTimeout(callback, Math.max(0, delayMs)), false),
  setInterval: (callback: () => void, periodMs: number): Timer =>
    new SystemTimer(setInterval(callback, Math.max(1, periodMs)), true),
})

class ManualTimer implements Timer {
  dueMs: number
  readonly seq: number
  readonly periodMs: number
  readonly callback: () => void
  cancelled = false
  readonly #clock: ManualClock
  constructor(
    clock: ManualClock,
    callback: () => void,
    dueMs: number,
    periodMs: number,
    seq: number,
  ) {
    this.#clock = clock
    this.callback = callback
    this.dueMs = dueMs
    this.periodMs = periodMs
    this.seq = seq
  }
  cancel(): void {
    if (this.cancelled) return
    this.cancelled = true
    this.#clock.pendingCount--
  }
  unref(): Timer {
    return this
  }
}

/**
 * A clock that moves only when told. `advance(ms)` fires every timer due
 * within the step in time order (ties in the order they were set), with
 * `now()` equal to each timer's due time while it runs. Timers set by a
 * callback fire in the same `advance` if they fall due within it.
 */
export class ManualClock implements Clock {
  #nowMs: number
  #wallOriginMs: number
  #seq = 0
  // Binary min-heap on (dueMs, seq).
  #heap: ManualTimer[] = []
  /** Timers armed and not yet fired or cancelled. @internal */
  pendingCount = 0

  constructor(startMs = 0, wallOriginMs = 1_700_000_000_000) {
    this.#nowMs = startMs
    this.#wallOriginMs = wallOriginMs
  }

  now(): number {
    return this.#nowMs
  }

  wallNow(): number {
    return this.#wallOriginMs + this.#nowMs
  }

  setTimeout(callback: () => void, delayMs: number): Timer {
    return this.#arm(callback, Math.max(0, delayMs), 0)
  }

  setInterval(callback: () => void, periodMs: number): Timer {
    const period = Math.max(1, periodMs)
    return this.#arm(callback, period, period)
  }

  /** Number of timers still pending. */
  get pending(): number {
    return this.pendingCount
  }

  /** Moves time forward by `ms` (≥ 0), firing due timers in order. */
  advance(ms: number): void {
    if (!(ms >= 0) || !Number.isFinite(ms)) {
      throw new RangeError(`ManualClock.advance: ms must be a finite number ≥ 0, received ${ms}`)
    }
    this.advanceTo(this.#nowMs + ms)
  }

  /** Moves time forward to `targetMs`, firing due timers in order. */
  advanceTo(targetMs: number): void {
    if (targetMs < this.#nowMs) {
      throw new RangeError(
        `ManualClock.advanceTo: time never goes back (now ${this.#nowMs}, received ${targetMs})`,
      )
    }
    for (;;) {
      const top = this.#peek()
      if (top === undefined || top.dueMs > targetMs) break
      this.#pop()
      this.#nowMs = Math.max(this.#nowMs, top.dueMs)
      if (top.periodMs > 0) {
        top.dueMs += top.periodMs
        this.#push(top)
      } else {
        top.cancelled = true
        this.pendingCount--
      }
      top.callback()
    }
    this.#nowMs = targetMs
  }

  /** Fires timers until none is pending, or `maxTimers` have fired (guards against intervals). */
  runAll(maxTimers = 10_000): void {
    for (let fired = 0; fired < maxTimers; fired++) {
      const top = this.#peek()
      if (top === undefined) return
      this.advanceTo(Math.max(this.#nowMs, top.dueMs))
    }
  }

  #arm(callback: () => void, delayMs: number, periodMs: number): Timer {
    const timer = new ManualTimer(this, callback, this.#nowMs + delayMs, periodMs, this.#seq++)
    this.pendingCount++
    this.#push(timer)
    return timer
  }

  #peek(): ManualTimer | undefined {
    // Drop cancelled timers lazily.
    while (this.#heap.length > 0 && this.#heap[0]!.cancelled) this.#pop()
    return this.#heap[0]
  }

  #less(a: ManualTimer, b: ManualTimer): boolean {
    return a.dueMs < b.dueMs || (a.dueMs === b.dueMs && a.seq < b.seq)
  }

  #push(timer: ManualTimer): void {
    const heap = this.#heap
    heap.push(timer)
    let i = heap.length - 1
    while (i > 0) {
      const parent = (i - 1) >> 1
      if (!this.#less(heap[i]!, heap[parent]!)) break
      ;[heap[i], heap[parent]] = [heap[parent]!, heap[i]!]
      i = parent
    }
  }

  #pop(): void {
    const heap = this.#heap
    const last = heap.pop()
    if (last === undefined || heap.length === 0) return
    heap[0] = last
    let i = 0
    for (;;) {
      const l = 2 * i + 1
      const r = l + 1
      let m = i
      if (l < heap.length && this.#less(heap[l]!, heap[m]!)) m = l
      if (r < heap.length && this.#less(heap[r]!, heap[m]!)) m = r
      if (m === i) break
      ;[heap[i], heap[m]] = [heap[m]!, heap[i]!]
      i = m
    }
  }
}
