import fc from 'fast-check'
import { describe, expect, it } from 'vitest'
import { TokenBucket } from '../../../shared/limiters/index.js'
import { ManualClock } from '../../../shared/index.js'

// A key's limit split between two processes whose shares move back and forth, as a keyed
// family's default share or a hot key's leases do: the one whose share falls keeps what its
// bucket holds above the new burst, going at the rate that left (TokenBucket.setRate with
// keepExcess); the one whose share rises earns its new burst from what it held. Together they
// never admit more than one bucket of the whole limit: rate·t + burst over any interval.

const step = fc.oneof(
  // wait ms, then process 0 or 1 takes 1 token
  fc.record({ waitMs: fc.nat(400), take: fc.constantFrom(0, 1) }),
  // wait ms, then the shares move: process 0 holds `share` of the limit, process 1 the rest
  fc.record({ waitMs: fc.nat(400), share: fc.constantFrom(0, 0.1, 1 / 3, 0.5, 2 / 3, 0.9, 1) }),
)

describe('a token bucket whose share moves (keepExcess)', () => {
  it('two processes whose shares move never admit more than one bucket of the whole limit', () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 1, max: 50 }),
        fc.integer({ min: 1, max: 100 }),
        fc.constantFrom(0, 1 / 3, 0.5, 1),
        fc.array(step, { minLength: 1, maxLength: 200 }),
        (ratePerSec, burst, first, steps) => {
          const clock = new ManualClock()
          let share = first
          // Process 0 starts full of its share (a first lease on a quiet resource); process 1 from empty.
          const buckets = [
            new TokenBucket(clock, ratePerSec * share, burst * share),
            new TokenBucket(clock, ratePerSec * (1 - share), burst * (1 - share), 0),
          ]
          const admitted: number[] = []
          for (const s of steps) {
            clock.advance(s.waitMs)
            if ('take' in s) {
              if (buckets[s.take]!.tryTake(1)) admitted.push(clock.now())
              continue
            }
            // The one that falls applies its lease first; the rise is granted once it has.
            const shares = [s.share, 1 - s.share]
            const before = [share, 1 - share]
            const order = shares[0]! < before[0]! ? [0, 1] : [1, 0]
            for (const i of order)
              buckets[i]!.setRate(ratePerSec * shares[i]!, burst * shares[i]!, true)
            share = s.share
          }
          for (let i = 0; i < admitted.length; i++)
            for (let j = i; j < admitted.length; j++)
              expect(j - i + 1).toBeLessThanOrEqual(
                (ratePerSec * (admitted[j]! - admitted[i]!)) / 1000 + burst + 1e-6,
              )
        },
      ),
    )
  })

  it('keeps the excess of a fall, spends it, and lets it go at the rate that left', () => {
    const clock = new ManualClock()
    // 100 a minute, held whole here; then two thirds go to other processes.
    const b = new TokenBucket(clock, 100 / 60, 100)
    b.setRate(100 / 180, 100 / 3, true)
    expect(b.tokens).toBeCloseTo(100, 9)
    expect(b.excess).toBeCloseTo(100 - 100 / 3, 9)
    // 30 s on: 2/3 of 100 a minute left, 33.3 tokens of excess gone, none earned.
    clock.advance(30_000)
    expect(b.tokens).toBeCloseTo(100 - 100 / 3, 6)
    // Spent as any token: 50 at once.
    for (let i = 0; i < 50; i++) expect(b.tryTake(1)).toBe(true)
    expect(b.tokens).toBeCloseTo(100 - 100 / 3 - 50, 6)
    // Below the burst now: it earns at its own rate again, up to its burst and no more.
    clock.advance(60_000)
    expect(b.tokens).toBeCloseTo(100 / 3, 6)
    expect(b.excess).toBe(0)
    // Without keepExcess a fall drops what exceeds the new burst, as ever.
    const d = new TokenBucket(clock, 10, 10)
    d.setRate(5, 5)
    expect(d.tokens).toBe(5)
  })
})
