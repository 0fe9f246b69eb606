import fc from 'fast-check'
import { describe, expect, it } from 'vitest'
import { arrivalAllowance, blockDryOdds } from '../../../server/pool/arrival-noise.js'

/** P(N > n) for N ~ Poisson(mean), summed in log space term by term (independent of the code). */
function tailAbove(mean: number, n: number): number {
  let below = 0
  for (let k = 0; k <= n; k++) {
    let logFact = 0
    for (let j = 2; j <= k; j++) logFact += Math.log(j)
    below += Math.exp(-mean + k * Math.log(mean) - logFact)
  }
  return 1 - below
}

describe('arrivalAllowance: what requests arriving at random ask past their mean', () => {
  it('is nothing for a mean of nothing', () => {
    expect(arrivalAllowance(0)).toBe(0)
    expect(arrivalAllowance(-1)).toBe(0)
    expect(arrivalAllowance(Number.NaN)).toBe(0)
  })

  it('covers the count with odds of at most blockDryOdds, and is the least whole count that does', () => {
    fc.assert(
      fc.property(fc.double({ min: 0.01, max: 100, noNaN: true }), (mean) => {
        const top = mean + arrivalAllowance(mean)
        expect(Number.isInteger(Math.round(top * 1e9) / 1e9)).toBe(true)
        const n = Math.round(top)
        expect(tailAbove(mean, n)).toBeLessThanOrEqual(blockDryOdds + 1e-12)
        expect(tailAbove(mean, n - 1)).toBeGreaterThan(blockDryOdds)
      }),
    )
  })

  it('past a mean of 100, stays within a unit of the exact quantile and grows as √mean', () => {
    for (const mean of [101, 150, 400]) {
      const n = Math.round(mean + arrivalAllowance(mean))
      expect(tailAbove(mean, n)).toBeLessThanOrEqual(blockDryOdds)
      expect(tailAbove(mean, n - 2)).toBeGreaterThan(blockDryOdds)
    }
    expect(arrivalAllowance(10_000)).toBeLessThan(0.04 * 10_000)
  })
})
