import { describe, expect, it } from 'vitest'
import { ManualClock } from '../../shared/index.js'

describe('ManualClock', () => {
  it('fires due timers in time order, with now() at each timer’s due time', () => {
    const clock = new ManualClock()
    const seen: Array<[string, number]> = []
    clock.setTimeout(() => seen.push(['b', clock.now()]), 20)
    clock.setTimeout(() => seen.push(['a', clock.now()]), 10)
    clock.setTimeout(() => seen.push(['c', clock.now()]), 30)
    clock.advance(25)
    expect(seen).toEqual([
      ['a', 10],
      ['b', 20],
    ])
    expect(clock.now()).toBe(25)
    clock.advance(5)
    expect(seen.at(-1)).toEqual(['c', 30])
  })

  it('fires timers due at the same time in the order they were set', () => {
    const clock = new ManualClock()
    const seen: number[] = []
    for (let i = 0; i < 5; i++) clock.setTimeout(() => seen.push(i), 7)
    clock.advance(7)
    expect(seen).toEqual([0, 1, 2, 3, 4])
  })

  it('does not fire a cancelled timer', () => {
    const clock = new ManualClock()
    let fired = false
    const timer = clock.setTimeout(() => (fired = true), 5)
    timer.cancel()
    timer.cancel()
    clock.advance(10)
    expect(fired).toBe(false)
    expect(clock.pending).toBe(0)
  })

  it('repeats an interval every period until cancelled', () => {
    const clock = new ManualClock()
    const at: number[] = []
    const timer = clock.setInterval(() => at.push(clock.now()), 10)
    clock.advance(35)
    expect(at).toEqual([10, 20, 30])
    timer.cancel()
    clock.advance(100)
    expect(at).toEqual([10, 20, 30])
  })

  it('fires, within the same advance, a timer that a callback sets', () => {
    const clock = new ManualClock()
    const at: number[] = []
    clock.setTimeout(() => {
      at.push(clock.now())
      clock.setTimeout(() => at.push(clock.now()), 5)
    }, 10)
    clock.advance(20)
    expect(at).toEqual([10, 15])
  })

  it('refuses to move backwards or by a non-finite step', () => {
    const clock = new ManualClock(100)
    expect(() => clock.advanceTo(50)).toThrow(RangeError)
    expect(() => clock.advance(-1)).toThrow(RangeError)
    expect(() => clock.advance(NaN)).toThrow(RangeError)
  })

  it('derives wall time from its own time, for display stamps', () => {
    const clock = new ManualClock(0, 1000)
    clock.advance(250)
    expect(clock.wallNow()).toBe(1250)
  })

  it('runAll fires pending timeouts and stops at its budget when an interval never ends', () => {
    const clock = new ManualClock()
    let count = 0
    clock.setTimeout(() => count++, 1000)
    clock.runAll()
    expect(count).toBe(1)
    clock.setInterval(() => count++, 1)
    clock.runAll(50)
    expect(count).toBe(51)
  })
})
