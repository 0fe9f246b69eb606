import fc from 'fast-check'
import { describe, expect, it } from 'vitest'
import { allocate, wholeUnits } from '../../../server/allocation/index.js'

describe('wholeUnits', () => {
  it('twenty clients at 2.5 slots use all 50: ten get 3, ten get 2', () => {
    const out = [...wholeUnits(new Float64Array(20).fill(2.5))]
    expect(out.reduce((a, b) => a + b, 0)).toBe(50)
    expect(out.filter((x) => x === 3).length).toBe(10)
    expect(out.filter((x) => x === 2).length).toBe(10)
  })

  it('gives floors or ceilings only, sums to floor(Σ), and favours the largest remainders', () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 0, max: 500 }),
        fc.array(
          fc.record({
            wants: fc.double({ min: 0, max: 100, noNaN: true }),
            weight: fc.double({ min: 0.1, max: 10, noNaN: true }),
          }),
          { minLength: 1, maxLength: 40 },
        ),
        (capacity, demands) => {
          const grants = allocate({
            capacity,
            surplus: 'hold',
            clients: demands.map((d, i) => ({ id: `c${i}`, ...d })),
          }).grants
          const out = wholeUnits(grants)
          const total = grants.reduce((a, b) => a + b, 0)
          const sum = out.reduce((a, b) => a + b, 0)
          expect(sum).toBe(Math.floor(total + 1e-9))
          expect(sum).toBeLessThanOrEqual(capacity)
          for (let i = 0; i < out.length; i++) {
            expect(Number.isInteger(out[i])).toBe(true)
            expect(out[i]).toBeGreaterThanOrEqual(Math.floor(grants[i]! + 1e-9))
            expect(out[i]).toBeLessThanOrEqual(Math.ceil(grants[i]! - 1e-9))
          }
          // Nobody rounded down has a larger remainder than somebody rounded up.
          const rem = (i: number): number => grants[i]! - Math.floor(grants[i]! + 1e-9)
          const up = [...out.keys()].filter((i) => out[i]! > Math.floor(grants[i]! + 1e-9))
          const down = [...out.keys()].filter(
            (i) => out[i]! === Math.floor(grants[i]! + 1e-9) && rem(i) > 1e-9,
          )
          for (const u of up)
            for (const d of down) expect(rem(u)).toBeGreaterThanOrEqual(rem(d) - 1e-12)
        },
      ),
    )
  })
})
