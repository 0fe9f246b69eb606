import fc from 'fast-check'
import { describe, expect, it } from 'vitest'
import { backoffCapFor, backoffDelayMs, connectTimeoutFor } from '../../shared/backoff.js'

describe('reconnect backoff', () => {
  it('doubles its ceiling per attempt up to the cap', () => {
    const top = (attempt: number): number => backoffDelayMs(attempt, 100, 10_000, () => 1)
    expect([0, 1, 2, 3, 6, 7, 50].map(top)).toEqual([100, 200, 400, 800, 6400, 10_000, 10_000])
  })

  it('draws each delay uniformly below the ceiling (full jitter), never negative or above the cap', () => {
    fc.assert(
      fc.property(fc.nat(1000), fc.double({ min: 0, max: 0.999999, noNaN: true }), (attempt, u) => {
        const d = backoffDelayMs(attempt, 100, 10_000, () => u)
        expect(d).toBeGreaterThanOrEqual(0)
        expect(d).toBeLessThan(10_000)
        expect(d).toBeCloseTo(u * Math.min(10_000, 100 * 2 ** Math.min(attempt, 30)), 6)
      }),
    )
  })
})

describe('backoffCapFor and connectTimeoutFor', () => {
  it('caps a refused attempt at the lower of the two caps, any other at the plain cap', () => {
    expect(backoffCapFor(true, 10_000, 500)).toBe(500)
    expect(backoffCapFor(true, 300, 500)).toBe(300)
    expect(backoffCapFor(false, 10_000, 500)).toBe(10_000)
  })

  it('doubles the connect timeout per attempt accepted and left silent, up to 8 times', () => {
    expect([0, 1, 2, 3, 4, 10].map((n) => connectTimeoutFor(1000, n))).toEqual([
      1000, 2000, 4000, 8000, 8000, 8000,
    ])
  })
})
