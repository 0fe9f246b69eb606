import type { Clock } from '../../shared/index.js'
import {
  windowAt,
  windowOfIndex,
  windowSpecKey,
  type QuotaWindow,
  type WindowSpec,
} from '../config/index.js'
import type { QuotaClock } from '../pool/index.js'

/**
 * How fast the windows' clock catches up with the wall clock it disagrees
 * with: 1% (a day's window then lasts 14 minutes less, or more, until the
 * two agree; 30 s are caught up in 50 minutes).
 */
export const windowSlewRate = 0.01

/**
 * How far ahead of where the ledger's writer left the windows the wall clock
 * may be at a restart and still be taken as right, ms: a restart that quick
 * (a SIGKILL and a supervisor's restart) resumes the windows exactly on the
 * wall clock, as only a step of at most this much could make that wrong.
 */
export const resumeToleranceMs = 2000

/**
 * Most of the time a resume credits to the writer's slow writes (QuotaWindows.resume): a
 * writer whose writes took longer than half this still has a step beyond it detected.
 */
export const maxWriteLatencyCreditMs = 10_000

/**
 * Quota windows are wall-clock windows (a day is a day); the pool runs on the
 * monotonic clock. The windows are read off a clock of their own: it runs on
 * the monotonic clock, starts at the wall clock (or, restored from a ledger,
 * where the windows' clock of the writer stood at its last write), and when
 * the wall clock disagrees with it (a step, a restart's downtime) it slews
 * toward it by `windowSlewRate`, never jumps. So no step of the wall clock,
 * live or across a restart, either way, re-opens a window or cuts one short
 * by more than 1%; a window's number never goes back; and the windows come
 * back in line with the wall clock on their own. While it trails the wall
 * clock by less than a window, a window also ends at its wall-clock end (a
 * gap, never an overlap). docs/operations.md,
 * "Quota windows and clock steps", states the rule and its measured effect.
 */
export class QuotaWindows {
  readonly #clock: Clock
  /** The windows' clock at `#refMs` (monotonic), and the pair's slope since. */
  #refMs: number
  #refWindowsMs: number
  /** Per spec: the window last given (placed on the windows' clock), and the lowest number still allowed. */
  readonly #last = new Map<string, QuotaWindow>()
  readonly #floor = new Map<string, number>()

  constructor(clock: Clock) {
    this.#clock = clock
    this.#refMs = clock.now()
    this.#refWindowsMs = clock.wallNow()
  }

  /** The windows' clock at `nowMs` (monotonic), slewed toward the wall clock since the last reading. */
  windowsMs(nowMs: number): number {
    const elapsed = nowMs - this.#refMs
    if (elapsed <= 0) return this.#refWindowsMs + elapsed
    const wallMs = nowMs - this.#clock.now() + this.#clock.wallNow()
    const plain = this.#refWindowsMs + elapsed
    let t = plain
    if (plain < wallMs) t = Math.min(wallMs, this.#refWindowsMs + elapsed * (1 + windowSlewRate))
    else if (plain > wallMs)
      t = Math.max(wallMs, this.#refWindowsMs + elapsed * (1 - windowSlewRate))
    this.#refMs = nowMs
    this.#refWindowsMs = t
    return t
  }

  /** How far the wall clock is ahead of the windows' clock now, ms (0 when they agree). */
  lagMs(): number {
    const nowMs = this.#clock.now()
    return this.#clock.wallNow() - this.windowsMs(nowMs)
  }

  /**
   * A ledger's writer stood at `windowsMs` on its windows' clock at its last
   * write: this process's windows' clock starts there (the time since, the
   * downtime, is not known: it is caught up by slewing), or at the wall clock
   * when that is at most `resumeToleranceMs` ahead of it, besides the
   * `startingMs` this process spent starting and twice the `writeLatencyMs`
   * its writer's writes were taking (up to `maxWriteLatencyCreditMs`).
   */
  resume(windowsMs: number, startingMs = 0, writeLatencyMs = 0): void {
    this.#refMs = this.#clock.now()
    const wallMs = this.#clock.wallNow()
    // The wall clock a little ahead is taken as the time the restart took (it cannot be told
    // from a step that small, which could cut the restored window short by as much); further
    // ahead, or behind, the windows resume where the writer's stood and are slewed. The time
    // this process spent starting (`startingMs`, measured on its monotonic clock) is no step:
    // not counted (a restart under load took 1-3 s to start, and resumed ~2 s behind). Nor
    // is the time the writer's last write was stale by at its end: its stamp is taken when
    // its changes are, and it is durable a write's latency later, while the next, lost, may
    // have been in flight as long (#41: a keyed quota over 30 gateways, writes taking 1-3 s,
    // its coordinator SIGKILLed and restarted 0.5 s later resumed 2.3-5 s behind; every
    // window's edge then refused everything for as long, for 4-8 minutes of slewing).
    const ahead = wallMs - windowsMs
    const credit =
      Math.max(0, startingMs) + Math.min(2 * Math.max(0, writeLatencyMs), maxWriteLatencyCreditMs)
    this.#refWindowsMs = ahead >= 0 && ahead - credit <= resumeToleranceMs ? wallMs : windowsMs
    this.#last.clear()
  }

  /** Window numbers of `spec` below `index` are never given again (a ledger's leases were of it). */
  hold(spec: WindowSpec, index: number): void {
    const key = windowSpecKey(spec)
    if ((this.#floor.get(key) ?? -Infinity) >= index) return
    this.#floor.set(key, index)
    this.#last.delete(key)
  }

  /** The pool's view: the window in force at `nowMs` (monotonic), placed on the monotonic clock. */
  readonly at: QuotaClock = (spec, nowMs) => {
    const t = this.windowsMs(nowMs)
    const key = windowSpecKey(spec)
    let w = this.#last.get(key)
    if (w === undefined || t < w.startMs || t >= w.endMs) {
      w = windowAt(spec, t)
      const floor = this.#floor.get(key)
      if (floor !== undefined && w.index < floor) w = windowOfIndex(spec, floor)
      else this.#floor.set(key, w.index)
      // A window of the floor ahead of the clock is cached only once the clock is inside it.
      if (t >= w.startMs && t < w.endMs) this.#last.set(key, w)
    }
    // The windows' clock trailing the wall clock by less than a window (a restart's downtime
    // being slewed away, or a small forward step): the window is placed on the wall clock, so it
    // never outlasts its wall-clock end (what was left of it would be admitted in the next window
    // as the wall clock counts: up to 6 of a key's 100 in a fault run). The next window still
    // opens on the windows' clock: the gap between is admitted from neither.
    const wallMs = nowMs - this.#clock.now() + this.#clock.wallNow()
    const lagMs = wallMs - t
    const placedMs = lagMs > 0 && lagMs < w.endMs - w.startMs ? wallMs : t
    return {
      index: w.index,
      startMs: nowMs + (w.startMs - placedMs),
      endMs: Math.max(nowMs + (w.endMs - placedMs), nowMs + 1),
      nextMs: nowMs + (w.endMs - t),
    }
  }
}
