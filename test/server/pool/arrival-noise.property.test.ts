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

  it('below a mean of 10: covers the count with odds of at most blockDryOdds, and is the least whole count that does', () => {
    fc.assert(
      fc.property(fc.double({ min: 0.01, max: 9.99, noNaN: true }), (mean) => {
        const n = Math.round(mean + arrivalAllowance(mean))
        expect(Math.abs(n - (mean + arrivalAllowance(mean)))).toBeLessThan(1e-9)
        expect(tailAbove(mean, n)).toBeLessThanOrEqual(blockDryOdds + 1e-12)
        expect(tailAbove(mean, n - 1)).toBeGreaterThan(blockDryOdds)
      }),
    )
  })

  it('from a mean of 10: the normal tail and a unit, never below the Poisson quantile, at most a unit above it', () => {
    fc.assert(
      fc.property(fc.double({ min: 10, max: 400, noNaN: true }), (mean) => {
        const top = Math.round(mean + arrivalAllowance(mean))
        expect(Math.abs(top - (mean + arrivalAllowance(mean)))).toBeLessThan(1e-9)
        expect(tailAbove(mean, top)).toBeLessThanOrEqual(blockDryOdds)
        expect(tailAbove(mean, top - 2)).toBeGreaterThan(blockDryOdds)
      }),
      { numRuns: 200 },
    )
    expect(arrivalAllowance(10_000)).toBeLessThan(0.04 * 10_000)
  })
})
