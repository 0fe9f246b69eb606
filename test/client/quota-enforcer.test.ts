import { describe, expect, it } from 'vitest'
import { DemandMeter } from '../../client/demand-meter.js'
import { QuotaEnforcer } from '../../client/enforcer.js'
import { CoarseClock, ManualClock } from '../../shared/index.js'

/**
 * The quota enforcer alone on a manual clock, with no timer of the resource's to help it: a next
 * window's budget sent ahead is put in force by the first check after that window opens (#41:
 * the resource's timer may fire late, and the checks between must not wait for it).
 */
describe('QuotaEnforcer and a next window sent ahead', () => {
  const host = { refused: () => undefined, slotsReleased: () => undefined }

  it('puts the next window’s budget in force at the first check once it has opened, and not before', () => {
    const clock = new ManualClock()
    const q = new QuotaEnforcer(clock, new DemandMeter(clock.now()), host)
    q.window(5, 750, { index: 6, capacity: 4, startsInMs: 760, endsInMs: 2_000 })
    q.apply(12)
    for (let i = 0; i < 10; i++) expect(q.tryAcquire(1, 0)).toBe(true)
    let got = 0
    clock.advance(755)
    expect(q.tryAcquire(1, 0), 'window 5 over, window 6 not open').toBe(false)
    expect(q.remaining(), 'nothing left to admit, whatever window 5’s budget held').toBe(0)
    expect(q.usedInWindow()).toEqual({ used: 10, window: 5 })
    clock.advance(5)
    got = 0
    while (q.tryAcquire(1, 0)) got++
    expect(got).toBe(4)
    expect(q.usedInWindow()).toEqual({ used: 4, window: 6 })
    expect(q.msUntilFull()).toBe(2_000 - 760)
    clock.advance(2_000 - 760)
    expect(q.remaining()).toBe(0)
  })

  it('lets a window’s own budget, while it lasts, rule over the next one’s; and forgets the next one when told to', () => {
    const clock = new ManualClock()
    const q = new QuotaEnforcer(clock, new DemandMeter(clock.now()), host)
    q.window(5, 750, { index: 6, capacity: 4, startsInMs: 760, endsInMs: 2_000 })
    q.apply(2)
    expect(q.tryAcquire(1, 0)).toBe(true)
    expect(q.tryAcquire(1, 0)).toBe(true)
    // Spent, window 5 still in force: refused, its budget is not topped up from the next.
    expect(q.tryAcquire(1, 0)).toBe(false)
    expect(q.usedInWindow()).toEqual({ used: 2, window: 5 })
    q.forgetNext()
    clock.advance(800)
    expect(q.tryAcquire(1, 0), 'the client’s id taken over: nothing of window 6').toBe(false)
    expect(q.usedInWindow()).toEqual({ used: 2, window: 5 })
  })
})

describe('QuotaEnforcer on a coarse clock', () => {
  it('places the next window’s start from the real time, not a lagging reading: never open early', () => {
    let t = 0
    // A source whose timers never fire: the coarse reading moves only when the test ticks it.
    const never = { cancel: () => undefined, unref: () => never }
    const source = {
      now: () => t,
      wallNow: () => t,
      setTimeout: () => never,
      setInterval: () => never,
    }
    const coarse = new CoarseClock(source)
    const q = new QuotaEnforcer(coarse, new DemandMeter(0), {
      refused: () => undefined,
      slotsReleased: () => undefined,
    })
    // The lease comes at 100 ms while the reading still says 0 (a busy event loop).
    t = 100
    q.window(5, 750, { index: 6, capacity: 4, startsInMs: 760, endsInMs: 2_000 })
    q.apply(10)
    // Window 6 opens 760 ms after the lease came: 860 ms, real time.
    t = 855
    coarse.tick()
    expect(q.tryAcquire(1, 0), '5 ms before the next window opens').toBe(false)
    t = 860
    coarse.tick()
    expect(q.tryAcquire(1, 0)).toBe(true)
    expect(q.usedInWindow()).toEqual({ used: 1, window: 6 })
  })
})
