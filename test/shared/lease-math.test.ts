import { describe, expect, it } from 'vitest'
import { fastestRefillMs, slowestRefillMs } from '../../shared/index.js'

describe('slowestRefillMs (the coordinator’s quiet spell and a client’s earned share alike)', () => {
  it('is the slowest key’s burst over its capacity, the plan’s keys included', () => {
    expect(slowestRefillMs({ capacity: 20, burst: 20 }, {})).toBe(1000)
    // "100 per minute": 60 s to refill.
    expect(slowestRefillMs({ capacity: 100 / 60, burst: 100 }, {})).toBeCloseTo(60_000, 6)
    expect(slowestRefillMs({ capacity: 20, burst: 20 }, { slow: { capacity: 1, burst: 10 } })).toBe(
      10_000,
    )
    expect(
      slowestRefillMs({ capacity: 20, burst: 40 }, { fast: { capacity: 100, burst: 1 } }),
    ).toBe(2000)
  })

  it('never refills a key of capacity 0 that has a burst; one with neither refills at once', () => {
    expect(slowestRefillMs({ capacity: 20, burst: 20 }, { off: { capacity: 0, burst: 5 } })).toBe(
      Infinity,
    )
    expect(slowestRefillMs({ capacity: 0, burst: 0 }, {})).toBe(0)
  })
})

describe('fastestRefillMs (the pace a fall’s gift goes at least, for every key)', () => {
  it('is the fastest key’s burst over its capacity, the plan’s keys included', () => {
    expect(fastestRefillMs({ capacity: 20, burst: 20 }, {})).toBe(1000)
    expect(fastestRefillMs({ capacity: 20, burst: 20 }, { slow: { capacity: 1, burst: 10 } })).toBe(
      1000,
    )
    expect(
      fastestRefillMs({ capacity: 20, burst: 40 }, { fast: { capacity: 100, burst: 1 } }),
    ).toBe(10)
    // A key that never refills does not make the others slower; one with nothing refills at once.
    expect(fastestRefillMs({ capacity: 20, burst: 20 }, { off: { capacity: 0, burst: 5 } })).toBe(
      1000,
    )
    expect(fastestRefillMs({ capacity: 20, burst: 20 }, { none: { capacity: 0, burst: 0 } })).toBe(
      0,
    )
  })
})
