import fc from 'fast-check'
import { describe, expect, it } from 'vitest'
import {
  excessOverBound,
  integral,
  maxInFlight,
  worstWindowRatio,
  type Admission,
  type CapacitySteps,
} from '../../bench/faults/measure.js'

const steps: CapacitySteps = [
  { fromMs: 0, capacity: 1000 },
  { fromMs: 2000, capacity: 300 },
]

/** By definition: every pair of admissions as the ends of an interval. */
function bruteExcess(admissions: Admission[], burst: number): number {
  const sorted = [...admissions].sort((a, b) => a.t - b.t)
  let worst = -Infinity
  for (let i = 0; i < sorted.length; i++) {
    let sum = 0
    for (let j = i; j < sorted.length; j++) {
      sum += sorted[j]!.n
      const cap = integral(steps, sorted[j]!.t) - integral(steps, sorted[i]!.t)
      worst = Math.max(worst, sum - cap - burst)
    }
  }
  return sorted.length === 0 ? -burst : worst
}

describe('fault suite measures', () => {
  it('integrates a capacity that changes over time', () => {
    expect(integral(steps, 1000)).toBe(1000)
    expect(integral(steps, 3000)).toBe(2000 + 300)
  })

  it('finds the worst excess over ∫capacity + burst exactly, as the brute force does', () => {
    const admission = fc.record({
      t: fc.integer({ min: 0, max: 4000 }),
      n: fc.integer({ min: 0, max: 400 }),
    })
    fc.assert(
      fc.property(
        fc.array(admission, { maxLength: 40 }),
        fc.integer({ min: 0, max: 500 }),
        (a, b) => {
          expect(excessOverBound(a, steps, b)).toBeCloseTo(bruteExcess(a, b), 6)
        },
      ),
    )
  })

  it('rates the worst one-second window against the capacity of that window', () => {
    const a = [
      { t: 0, n: 500 },
      { t: 500, n: 500 },
      { t: 2500, n: 450 },
    ]
    expect(worstWindowRatio(a, steps)).toBeCloseTo(1.5)
  })

  it('counts slots in flight across processes, releases first at a tie', () => {
    expect(
      maxInFlight([
        { t: 0, d: 1 },
        { t: 1, d: 1 },
        { t: 2, d: -1 },
        { t: 2, d: 1 },
        { t: 3, d: 1 },
      ]),
    ).toBe(3)
  })
})
