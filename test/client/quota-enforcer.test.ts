import fc from 'fast-check'
import { describe, expect, it } from 'vitest'
import { DemandMeter } from '../../client/demand-meter.js'
import { QuotaEnforcer } from '../../client/enforcer.js'
import { CoarseClock, ManualClock } from '../../shared/index.js'

const host = {
  refused: () => undefined,
  lowOnBudget: () => undefined,
  slotsReleased: () => undefined,
}

/** A quota enforcer on a manual clock. */
function enforcer(): { clock: ManualClock; q: QuotaEnforcer } {
  const clock = new ManualClock()
  return { clock, q: new QuotaEnforcer(clock, new DemandMeter(clock.now()), host) }
}

/**
 * Window 5 ends 750 ms from now with a budget of `budget`; window 6 (4 units) is sent ahead,
 * opening 760 ms from now.
 */
function withNextWindow(budget: number): { clock: ManualClock; q: QuotaEnforcer } {
  const e = enforcer()
  e.q.window(5, 750, { index: 6, capacity: 4, startsInMs: 760, endsInMs: 2_000 })
  e.q.apply(budget)
  return e
}

/**
 * The quota enforcer alone on a manual clock, with no timer of the resource's to help it: a next
 * window's budget sent ahead is put in force by the first check after that window opens (#41:
 * the resource's timer may fire late, and the checks between must not wait for it).
 */
describe('QuotaEnforcer and a next window sent ahead', () => {
  it('puts the next window’s budget in force at the first check once it has opened, and not before', () => {
    const { clock, q } = withNextWindow(12)
    for (let i = 0; i < 10; i++) expect(q.tryAcquire(1, 0)).toBe(true)
    let got = 0
    clock.advance(755)
    // Window 5 over here, window 6 not open: the coordinator may be in either, so a check is
    // spent from both (2 left of 5's, 4 of 6's).
    expect(q.remaining(), 'what both windows have room for').toBe(2)
    expect(q.tryAcquire(1, 0), 'between the windows, from both').toBe(true)
    expect(q.usedInWindow()).toEqual({ used: 11, window: 5 })
    expect(q.tryAcquire(1, 0)).toBe(true)
    expect(q.tryAcquire(1, 0), 'window 5’s budget spent: refused, whatever 6 holds').toBe(false)
    expect(q.remaining()).toBe(0)
    expect(q.msUntil(1), 'until window 6 opens').toBe(5)
    clock.advance(5)
    got = 0
    while (q.tryAcquire(1, 0)) got++
    expect(got, 'window 6’s 4, less the 2 spent between the windows').toBe(2)
    expect(q.usedInWindow()).toEqual({ used: 4, window: 6 })
    expect(q.msUntilFull()).toBe(2_000 - 760)
    clock.advance(2_000 - 760)
    expect(q.remaining()).toBe(0)
  })

  it('lets a window’s own budget, while it lasts, rule over the next one’s; and forgets the next one when told to', () => {
    const { clock, q } = withNextWindow(2)
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
    const q = new QuotaEnforcer(coarse, new DemandMeter(0), host)
    // The lease comes at 100 ms while the reading still says 0 (a busy event loop).
    t = 100
    q.window(5, 750, { index: 6, capacity: 4, startsInMs: 760, endsInMs: 2_000 })
    // Window 5's budget spent: nothing between the windows (spent from both).
    q.apply(0)
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

describe('QuotaEnforcer at a clean close between two windows', () => {
  it('says the next window’s count once some of its block ahead was spent, else the window’s', () => {
    const { clock, q } = withNextWindow(12)
    expect(q.tryAcquire(3, 0)).toBe(true)
    expect(q.usedAtClose(), 'mid-window').toEqual({ used: 3, window: 5 })
    clock.advance(755)
    // Between the windows, nothing of the next spent yet: it may all come back.
    expect(q.usedAtClose()).toEqual({ used: 3, window: 5 })
    expect(q.tryAcquire(1, 0)).toBe(true)
    // Spent of both: a close that said window 5's 4 would let the coordinator take the block
    // of window 6 back as unspent, though 1 of it may be window 6's.
    expect(q.usedAtClose()).toEqual({ used: 1, window: 6 })
    expect(q.usedInWindow(), 'reports still count the window ending').toEqual({
      used: 4,
      window: 5,
    })
    clock.advance(5)
    expect(q.usedAtClose(), 'window 6 open here').toEqual({ used: 1, window: 6 })
  })
})

/**
 * Checks between a window's end as placed here and the next one's start sent ahead (#41): the
 * coordinator's edge may be anywhere between, so whichever window a check truly falls in must
 * count it. For any budgets, placements and edge, the checks each window admitted (by the true
 * edge) never exceed its budget; the next window's own lease, come early or late, changes that
 * neither.
 */
describe('QuotaEnforcer between two windows', () => {
  it('never lets either window admit more than its budget, wherever the edge falls between', () => {
    fc.assert(
      fc.property(
        fc.record({
          budget: fc.integer({ min: 0, max: 12 }),
          nextBudget: fc.integer({ min: 0, max: 12 }),
          endMs: fc.integer({ min: 1, max: 50 }),
          gapMs: fc.integer({ min: 0, max: 20 }),
          edgeAt: fc.double({ min: 0, max: 1, noNaN: true }),
          checks: fc.array(
            fc.tuple(fc.integer({ min: 0, max: 90 }), fc.integer({ min: 1, max: 3 })),
            {
              maxLength: 60,
            },
          ),
          ownLeaseMs: fc.option(fc.integer({ min: 0, max: 40 })),
          resendMs: fc.option(fc.integer({ min: 0, max: 60 })),
        }),
        (c) => {
          const { clock, q } = enforcer()
          const nextStartMs = c.endMs + c.gapMs
          const nextEndMs = nextStartMs + 100
          // The coordinator's edge, somewhere from this window's end to the next one's start.
          const edgeMs = Math.floor(c.endMs + c.edgeAt * c.gapMs)
          const next = (atMs: number) => ({
            index: 6,
            capacity: c.nextBudget,
            startsInMs: nextStartMs - atMs,
            endsInMs: nextEndMs - atMs,
          })
          q.window(5, c.endMs, next(0))
          q.apply(c.budget)
          const events: { atMs: number; run: () => void }[] = []
          const admitted = [0, 0]
          for (const [atMs, cost] of c.checks)
            events.push({
              atMs,
              run: () => {
                if (q.tryAcquire(cost, 0)) admitted[atMs < edgeMs ? 0 : 1]! += cost
              },
            })
          // This window's lease sent again before its end, carrying the same next window.
          if (c.resendMs !== null && c.resendMs < c.endMs)
            events.push({
              atMs: c.resendMs,
              run: () => {
                q.window(5, c.endMs - c.resendMs!, next(c.resendMs!))
                q.apply(c.budget)
              },
            })
          // The next window's own lease, made at the coordinator's edge, come before or after
          // it opened here.
          if (c.ownLeaseMs !== null)
            events.push({
              atMs: edgeMs + c.ownLeaseMs,
              run: () => {
                q.window(6, nextEndMs - (edgeMs + c.ownLeaseMs!))
                q.apply(c.nextBudget)
              },
            })
          events.sort((a, b) => a.atMs - b.atMs)
          for (const e of events) {
            clock.advance(e.atMs - clock.now())
            e.run()
          }
          expect(admitted[0]).toBeLessThanOrEqual(c.budget)
          expect(admitted[1]).toBeLessThanOrEqual(c.nextBudget)
        },
      ),
    )
  })
})
