import fc from 'fast-check'
import { describe, expect, it } from 'vitest'
import { defaultDemandWindow } from '../../../server/config/schema.js'
import { DemandHistory, peakDecayPerReport } from '../../../server/pool/demand.js'

const demand = fc.double({ min: 0, max: 1e6, noNaN: true })
const fast = () => new DemandHistory('fast', defaultDemandWindow.fast)

describe('the fast demand estimator (the default)', () => {
  it('never under-estimates: at least the latest report, and a steady demand exactly', () => {
    fc.assert(
      fc.property(
        fc.array(demand, { maxLength: 30 }),
        demand,
        fc.nat({ max: 5 }),
        (before, steady, n) => {
          const h = fast()
          for (const d of before) {
            h.record(d)
            expect(h.estimate()).toBeGreaterThanOrEqual(d) // rises at once
          }
          for (let i = 0; i <= n; i++) h.record(steady)
          expect(h.estimate()).toBeGreaterThanOrEqual(steady)
          // Steady long enough, the estimate is the demand.
          for (let i = 0; i < 20; i++) h.record(steady)
          expect(h.estimate() - steady).toBeLessThan(1e-6) // what is left of the old peak
        },
      ),
    )
  })

  it('follows a drop at the next report, unless the old peak was over 8× higher (then it decays by 8× a report)', () => {
    fc.assert(
      fc.property(fc.array(demand, { minLength: 1, maxLength: 30 }), demand, (before, low) => {
        const h = fast()
        for (const d of before) h.record(d)
        const peak = Math.max(...before)
        h.record(low)
        const decayed = peak * peakDecayPerReport
        expect(h.estimate()).toBeLessThanOrEqual(Math.max(low, decayed) * (1 + 1e-12))
        expect(h.estimate()).toBeGreaterThanOrEqual(low)
      }),
    )
  })

  it('does not amplify noise: under demand within a band, the estimate stays in the band', () => {
    fc.assert(
      fc.property(
        fc.double({ min: 1, max: 1e5, noNaN: true }),
        fc.double({ min: 0, max: 0.5, noNaN: true }),
        fc.array(fc.double({ min: -1, max: 1, noNaN: true }), { minLength: 3, maxLength: 60 }),
        (level, width, noise) => {
          const h = fast()
          const lo = level * (1 - width)
          const hi = level * (1 + width)
          for (const [i, x] of noise.entries()) {
            h.record(level * (1 + width * x))
            if (i >= 1) {
              expect(h.estimate()).toBeGreaterThanOrEqual(lo * (1 - 1e-12))
              expect(h.estimate()).toBeLessThanOrEqual(hi * (1 + 1e-12))
            }
          }
        },
      ),
    )
  })

  it('follows a collapse in steps: a report taken in a stall does not take the whole share', () => {
    const h = fast()
    h.record(100)
    h.record(1)
    expect(h.estimate()).toBe(12.5)
    h.record(1)
    expect(h.estimate()).toBeCloseTo(1.5625, 10)
    h.record(1)
    expect(h.estimate()).toBe(1)
    h.record(50)
    expect(h.estimate()).toBe(50) // and rises at once
  })
})
