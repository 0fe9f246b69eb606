import fc from 'fast-check'
import { describe, expect, it } from 'vitest'
import {
  convergenceMs,
  episodes,
  jain,
  worstExcessOverBound,
  worstWindowRatio,
} from '../../../server/sim/metrics.js'

describe('simulator metrics', () => {
  it("Jain's index: 1 for equal shares, 1/n when one takes all", () => {
    expect(jain([2, 2, 2])).toBe(1)
    expect(jain([1, 0, 0, 0])).toBeCloseTo(0.25)
    expect(jain([1, 2])).toBeCloseTo(9 / 10)
    expect(jain([])).toBe(1)
  })

  it('worst window ratio over a sliding window', () => {
    // capacity 10 per tick; ticks admit 10, 12, 14, 10: the worst 2-tick window is 26/20.
    expect(worstWindowRatio([10, 12, 14, 10], [10, 10, 10, 10], 2)).toBeCloseTo(1.3)
    expect(worstWindowRatio([10, 12, 14, 10], [10, 10, 10, 10], 2, (i) => i !== 2)).toBeCloseTo(1.1)
  })

  it('excess over capacity·t + burst equals the brute-force maximum over all intervals', () => {
    fc.assert(
      fc.property(
        fc.array(fc.tuple(fc.integer({ min: 0, max: 50 }), fc.integer({ min: 0, max: 30 })), {
          minLength: 1,
          maxLength: 30,
        }),
        fc.integer({ min: 0, max: 40 }),
        (pairs, burst) => {
          const admitted = pairs.map((p) => p[0])
          const capacity = pairs.map((p) => p[1])
          let brute = -burst
          for (let i = 0; i < admitted.length; i++) {
            let excess = 0
            for (let j = i; j < admitted.length; j++) {
              excess += admitted[j]! - capacity[j]!
              brute = Math.max(brute, excess - burst)
            }
          }
          expect(worstExcessOverBound(admitted, capacity, burst) - brute).toBe(0)
        },
      ),
    )
  })

  it('excess skips intervals that touch an excluded tick', () => {
    // Tick 1 over-admits by 50; excluded, the rest never exceeds the bound.
    expect(worstExcessOverBound([10, 60, 10], [10, 10, 10], 5)).toBe(45)
    expect(worstExcessOverBound([10, 60, 10], [10, 10, 10], 5, (i) => i !== 1)).toBe(-5)
  })

  it('episodes: runs above the threshold and their peak', () => {
    expect(episodes([0.9, 1.05, 1.02, 0.99, 1.2, 1], 1.01)).toEqual({ count: 2, peak: 1.2 })
  })

  it('convergence: first converged sample at or after the event, before the next', () => {
    const times = [0, 100, 200, 300, 400]
    const ok = [true, false, false, true, true]
    expect(convergenceMs(times, ok, 100, 1000)).toBe(200)
    expect(convergenceMs(times, ok, 100, 250)).toBeUndefined()
  })
})
