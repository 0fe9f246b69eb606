import fc from 'fast-check'
import { describe, expect, it } from 'vitest'

// The properties' step sequences are as long as their maxLength says (test/helpers/setup.ts):
// with fast-check 4's default size an array of up to 200 steps held about 10.
describe('property test sizes', () => {
  it('generates arrays up to their maxLength', () => {
    const lengths = fc
      .sample(fc.array(fc.nat(), { maxLength: 200 }), { numRuns: 200, seed: 1 })
      .map((a) => a.length)
    expect(Math.max(...lengths)).toBeGreaterThan(100)
  })

  it('keeps arrays without a maxLength small', () => {
    const lengths = fc.sample(fc.array(fc.nat()), { numRuns: 200, seed: 1 }).map((a) => a.length)
    expect(Math.max(...lengths)).toBeLessThanOrEqual(10)
  })
})
