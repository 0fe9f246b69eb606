import fc from 'fast-check'
import { describe, expect, it } from 'vitest'
import { allocate, wholeTokens, wholeUnits } from '../../../server/allocation/index.js'

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

describe('wholeTokens', () => {
  it('a key of 20/s (burst 20) over 100 holders: twenty get 1/s, a whole token each, not 0.2/s and nothing', () => {
    const out = [...wholeTokens(new Float64Array(100).fill(0.2), 1)]
    expect(out.filter((x) => x === 1)).toHaveLength(20)
    expect(out.filter((x) => x === 0)).toHaveLength(80)
    // Ties to the earlier index: the same holders keep them round after round.
    expect(out.slice(0, 20)).toEqual(new Array(20).fill(1))
  })

  it('keeps shares of a token or more, hands the pooled slivers out whole, never more than they were', () => {
    fc.assert(
      fc.property(
        fc.double({ min: 0.05, max: 20, noNaN: true }),
        fc.array(fc.double({ min: 0, max: 30, noNaN: true }), { minLength: 1, maxLength: 60 }),
        (unit, values) => {
          const grants = Float64Array.from(values)
          const out = wholeTokens(grants, unit)
          let pooled = 0
          let given = 0
          for (let i = 0; i < grants.length; i++) {
            const small = grants[i]! > 0 && grants[i]! < unit * (1 - 1e-9)
            if (!small) expect(out[i]).toBe(grants[i])
            else {
              pooled += grants[i]!
              expect([0, unit]).toContain(out[i])
              given += out[i]!
            }
          }
          expect(given).toBeLessThanOrEqual(pooled + 1e-9 * unit)
          // As many whole units as the slivers held.
          expect(Math.round(given / unit)).toBe(Math.floor(pooled / unit + 1e-9))
        },
      ),
    )
  })
})
