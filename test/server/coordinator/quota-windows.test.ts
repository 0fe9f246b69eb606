import { describe, expect, it } from 'vitest'
import { QuotaWindows, windowSlewRate } from '../../../server/coordinator/quota-clock.js'
import type { WindowSpec } from '../../../server/config/index.js'
import { ManualClock, type Clock } from '../../../shared/index.js'

/** A manual clock whose wall clock can be stepped (the monotonic one never is). */
function steppedClock(): Clock & { advance(ms: number): void; step(ms: number): void } {
  const manual = new ManualClock(0, 1_800_000_000_000)
  let stepMs = 0
  return {
    now: () => manual.now(),
    wallNow: () => manual.wallNow() + stepMs,
    setTimeout: (cb, ms) => manual.setTimeout(cb, ms),
    setInterval: (cb, ms) => manual.setInterval(cb, ms),
    advance: (ms) => manual.advance(ms),
    step: (ms) => {
      stepMs += ms
    },
  }
}

const spec: WindowSpec = { kind: 'fixed', ms: 20_000 }

/** Every window number given as time goes on, and how long (monotonic) each was in force. */
function trace(
  clock: ReturnType<typeof steppedClock>,
  windows: QuotaWindows,
  forMs: number,
): { index: number; lastedMs: number }[] {
  const out: { index: number; lastedMs: number }[] = []
  for (let t = 0; t < forMs; t += 100) {
    const w = windows.at(spec, clock.now())
    const last = out.at(-1)
    if (last === undefined || last.index !== w.index) out.push({ index: w.index, lastedMs: 0 })
    else last.lastedMs += 100
    clock.advance(100)
  }
  return out
}

describe('quota windows on their own clock', () => {
  for (const stepSec of [30, -30])
    it(`are not re-opened by a live step of the wall clock (${stepSec > 0 ? '+' : ''}${stepSec} s): numbers only go up, none ends early by more than the slew`, () => {
      const clock = steppedClock()
      const windows = new QuotaWindows(clock)
      clock.advance(5_000)
      const before = windows.at(spec, clock.now())
      clock.step(stepSec * 1000)
      const after = windows.at(spec, clock.now())
      // The window in force is the same one, ending when it did.
      expect(after.index).toBe(before.index)
      expect(after.endMs).toBeCloseTo(before.endMs, 0)
      const seen = trace(clock, windows, 3_600_000)
      for (let i = 1; i < seen.length; i++)
        expect(seen[i]!.index).toBeGreaterThan(seen[i - 1]!.index)
      // Whole windows in between: none shorter than its length less the slew.
      for (const w of seen.slice(1, -1))
        expect(w.lastedMs).toBeGreaterThanOrEqual(20_000 * (1 - windowSlewRate) - 200)
      // And once the slew has made up the step (30 s at 1%: 3,000 s), they agree with the wall
      // clock again.
      const wall = clock.wallNow()
      const w = windows.at(spec, clock.now())
      expect(w.index).toBe(Math.floor(wall / 20_000))
    })

  it('resume where a ledger says the writer’s windows stood, whatever this wall clock says, and never go back', () => {
    const clock = steppedClock()
    clock.advance(5_000)
    const writer = new QuotaWindows(clock)
    const leased = writer.at(spec, clock.now())
    const lastWriteMs = clock.wallNow() // the writer's windows clock agrees with its wall clock
    // Restarted 500 ms later under a wall clock 30 s behind.
    clock.advance(500)
    clock.step(-30_000)
    const restarted = new QuotaWindows(clock)
    restarted.hold(spec, leased.index)
    restarted.resume(lastWriteMs)
    const w = restarted.at(spec, clock.now())
    expect(w.index).toBe(leased.index)
    // It lasts as long as it had left at the last write (the downtime is not known), not less.
    expect(w.endMs - clock.now()).toBeGreaterThanOrEqual(leased.endMs - 5_000 - 1)
    const seen = trace(clock, restarted, 300_000)
    expect(seen[0]!.index).toBe(leased.index)
    for (let i = 1; i < seen.length; i++) expect(seen[i]!.index).toBe(seen[i - 1]!.index + 1)
  })

  it('resume on the wall clock after a quick restart (the wall clock at most 2 s ahead of the last write)', () => {
    const clock = steppedClock()
    clock.advance(5_000)
    const lastWriteMs = clock.wallNow()
    clock.advance(800)
    const restarted = new QuotaWindows(clock)
    restarted.resume(lastWriteMs)
    expect(restarted.lagMs()).toBe(0)
    const w = restarted.at(spec, clock.now())
    expect(w.endMs - clock.now()).toBe(20_000 - 5_800)
  })

  it('credit the time this process spent starting: 0.5 s down and 2.5 s to start resume on the wall clock, 3 s unexplained do not', () => {
    const clock = steppedClock()
    clock.advance(5_000)
    const lastWriteMs = clock.wallNow()
    clock.advance(3_000)
    const started = new QuotaWindows(clock)
    started.resume(lastWriteMs, 2_500)
    expect(started.lagMs()).toBe(0)
    const unexplained = new QuotaWindows(clock)
    unexplained.resume(lastWriteMs, 0)
    expect(unexplained.lagMs()).toBeCloseTo(3_000, 0)
  })

  it('credit twice the writer’s write latency (up to 10 s): a stale last write is not a step', () => {
    const clock = steppedClock()
    clock.advance(5_000)
    const lastWriteMs = clock.wallNow()
    clock.advance(4_000)
    // 4 s since the last write: 1.5 s of writes explain 3 s of it, the 2 s tolerance the rest.
    const slow = new QuotaWindows(clock)
    slow.resume(lastWriteMs, 0, 1_500)
    expect(slow.lagMs()).toBe(0)
    const quick = new QuotaWindows(clock)
    quick.resume(lastWriteMs, 0, 500)
    expect(quick.lagMs()).toBeCloseTo(4_000, 0)
    // At most 10 s are credited: 30 s ahead is a step whatever the writes took.
    clock.advance(26_000)
    const capped = new QuotaWindows(clock)
    capped.resume(lastWriteMs, 0, 60_000)
    expect(capped.lagMs()).toBeCloseTo(30_000, 0)
  })

  it('hold a window a ledger’s leases were of, even when its clock stood earlier', () => {
    const clock = steppedClock()
    const windows = new QuotaWindows(clock)
    const now = windows.at(spec, clock.now())
    windows.hold(spec, now.index + 2)
    expect(windows.at(spec, clock.now()).index).toBe(now.index + 2)
    clock.advance(20_000)
    expect(windows.at(spec, clock.now()).index).toBe(now.index + 2)
  })

  it('never lets a window outlast its wall-clock end while they trail the wall clock by less than a window (a restart resumed behind)', () => {
    const clock = steppedClock()
    const windows = new QuotaWindows(clock)
    // A restart: the writer's windows' clock stood 3 s behind the wall clock now (more than
    // resumeToleranceMs: the downtime and the start took that long), 5 s into a window.
    const wallAtResume = clock.wallNow()
    const windowStart = Math.floor(wallAtResume / 20_000) * 20_000
    clock.advance(windowStart + 5_000 - wallAtResume)
    windows.resume(clock.wallNow() - 3_000)
    const w = windows.at(spec, clock.now())
    // The windows' clock is 2 s into the window; the wall clock 5 s: the window ends at its
    // wall end, 15 s from now (not 18).
    expect(w.endMs - clock.now()).toBeCloseTo(15_000, 0)
    // Through the next edges (the lag slewed away): every window ends by its wall-clock end (a
    // window past it is given 1 ms at most: the pool's floor), and numbers only go up.
    let last = w.index
    for (let t = 0; t < 400_000; t += 100) {
      const now = clock.now()
      const x = windows.at(spec, now)
      const wallEnd = (x.index + 1) * 20_000
      expect(x.endMs - now).toBeLessThanOrEqual(Math.max(1, wallEnd - clock.wallNow()) + 1e-6)
      expect(x.index).toBeGreaterThanOrEqual(last)
      last = x.index
      clock.advance(100)
    }
    expect(windows.lagMs()).toBeCloseTo(0, 0)
  })
})
