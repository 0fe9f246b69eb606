import fc from 'fast-check'
import { describe, expect, it } from 'vitest'
import { TokenBucket } from '../../../shared/limiters/index.js'
import { CoarseClock, ManualClock } from '../../../shared/index.js'

// The hot path's coarse clock: a cached reading refreshed by a timer that may run late by any
// amount. Real time is the manual source clock; the coarse clock ticks only when a test says
// (its own timer is set too far out to fire), so every pattern of lateness can be tried.

const never = 1e12

/** Every interval between two admissions: Σ cost ≤ rate·(t_j − t_i) + burst. Returns the worst excess. */
function worstExcess(
  events: Array<{ t: number; cost: number }>,
  ratePerMs: number,
  burst: number,
): number {
  let worst = -Infinity
  for (let i = 0; i < events.length; i++) {
    let sum = 0
    for (let j = i; j < events.length; j++) {
      sum += events[j]!.cost
      worst = Math.max(worst, sum - ratePerMs * (events[j]!.t - events[i]!.t) - burst)
    }
  }
  return worst
}

const step = fc.record({
  advanceMs: fc.oneof(fc.constant(0), fc.double({ min: 0, max: 40, noNaN: true })),
  // Ticks are rare and quiet spells common: a full bucket read at a stale tick is the danger.
  tick: fc.nat({ max: 3 }).map((n) => n === 0),
  takes: fc.oneof(fc.constant(0), fc.nat({ max: 12 })),
  cost: fc.integer({ min: 1, max: 3 }),
  quiet: fc.nat({ max: 19 }).map((n) => n === 0),
})

describe('CoarseClock and the token bucket on it', () => {
  it('never admits more than rate·t + burst over any interval of real time, however late the ticks', () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 1, max: 2000 }),
        fc.integer({ min: 1, max: 40 }),
        fc.array(step, { minLength: 1, maxLength: 120, size: 'max' }),
        (ratePerSec, burst, steps) => {
          const source = new ManualClock(0)
          const coarse = new CoarseClock(source, never)
          const bucket = new TokenBucket(coarse, ratePerSec, burst)
          const admitted: Array<{ t: number; cost: number }> = []
          for (const s of steps) {
            source.advance(s.advanceMs)
            if (s.tick) coarse.tick()
            if (s.quiet) {
              // A quiet process: ticks with no read until the timer stops; the next read wakes it.
              for (let i = 0; i <= 1000 && coarse.running; i++) coarse.tick()
              expect(coarse.running).toBe(false)
            }
            for (let k = 0; k < s.takes; k++)
              if (bucket.tryTake(s.cost)) admitted.push({ t: source.now(), cost: s.cost })
            expect(coarse.now()).toBeLessThanOrEqual(source.now()) // lags, never leads
          }
          coarse.close()
          return worstExcess(admitted, ratePerSec / 1000, burst) <= 1e-6
        },
      ),
    )
  })

  it('two buckets whose shares move, on late readings, never admit more than one bucket of the whole limit', () => {
    // A moving bucket's parts and excess (TokenBucket.moveRate) on the coarse clock:
    // what was taken at a reading counts as taken at the next one, as the plain path does.
    const splits = [
      [1, 0],
      [0.5, 0.5],
      [0.25, 0.75],
      [0, 1],
    ] as const
    fc.assert(
      fc.property(
        fc.integer({ min: 1, max: 2000 }),
        fc.integer({ min: 1, max: 40 }),
        fc.array(fc.tuple(step, fc.nat(splits.length), fc.nat(1)), {
          minLength: 1,
          maxLength: 120,
        }),
        (ratePerSec, burst, steps) => {
          const source = new ManualClock(0)
          const coarse = new CoarseClock(source, never)
          let split: readonly number[] = splits[0]
          const buckets = split.map((f) => new TokenBucket(coarse, ratePerSec * f, burst * f))
          const admitted: Array<{ t: number; cost: number }> = []
          for (const [s, to, who] of steps) {
            source.advance(s.advanceMs)
            if (s.tick) coarse.tick()
            if (to < splits.length) {
              // The one that falls first.
              const next = splits[to]!
              const order = next[0] < split[0]! ? [0, 1] : [1, 0]
              for (const i of order) buckets[i]!.moveRate(ratePerSec * next[i]!, burst * next[i]!)
              split = next
            }
            for (let k = 0; k < s.takes; k++)
              if (buckets[who]!.tryTake(s.cost)) admitted.push({ t: source.now(), cost: s.cost })
          }
          coarse.close()
          return worstExcess(admitted, ratePerSec / 1000, burst) <= 1e-6
        },
      ),
    )
  })

  it('a bucket that subtracts before capping, on the same late readings, over-admits (what the test above catches)', () => {
    const source = new ManualClock(0)
    const coarse = new CoarseClock(source, never)
    // The naive refill, on the same coarse readings.
    let tokens = 10
    let lastMs = coarse.now()
    const naive = (): boolean => {
      const now = coarse.now()
      tokens = Math.min(10, tokens + ((now - lastMs) * 100) / 1000)
      lastMs = now
      if (tokens < 1) return false
      tokens -= 1
      return true
    }
    const bucket = new TokenBucket(coarse, 100, 10)
    const run = (take: () => boolean) => {
      const events: Array<{ t: number; cost: number }> = []
      // Full at 0; the tick is 100 ms late; the full burst is taken just before it fires.
      source.advance(100)
      for (let i = 0; i < 10; i++) if (take()) events.push({ t: source.now(), cost: 1 })
      coarse.tick()
      source.advance(1)
      for (let i = 0; i < 20; i++) if (take()) events.push({ t: source.now(), cost: 1 })
      return events
    }
    const naiveEvents = run(naive)
    expect(worstExcess(naiveEvents, 0.1, 10)).toBeGreaterThan(9) // 10 tokens from 100 ms the bucket was full
    const source2 = new ManualClock(0)
    const coarse2 = new CoarseClock(source2, never)
    const ours = new TokenBucket(coarse2, 100, 10)
    const oursEvents: Array<{ t: number; cost: number }> = []
    source2.advance(100)
    for (let i = 0; i < 10; i++) if (ours.tryTake(1)) oursEvents.push({ t: source2.now(), cost: 1 })
    coarse2.tick()
    source2.advance(1)
    for (let i = 0; i < 20; i++) if (ours.tryTake(1)) oursEvents.push({ t: source2.now(), cost: 1 })
    expect(worstExcess(oursEvents, 0.1, 10)).toBeLessThanOrEqual(0)
    expect(bucket.ratePerSec).toBe(100)
  })

  it('admits the full rate when ticks are on time and demand never lets up', () => {
    fc.assert(
      fc.property(fc.integer({ min: 100, max: 100_000 }), (ratePerSec) => {
        const source = new ManualClock(0)
        const coarse = new CoarseClock(source, 1) // its own timer, on the manual clock: on time
        const burst = ratePerSec / 10
        const bucket = new TokenBucket(coarse, ratePerSec, burst, 0)
        let admitted = 0
        const ms = 2000
        for (let t = 0; t < ms; t++) {
          source.advance(1)
          while (bucket.tryTake(1)) admitted++
        }
        coarse.close()
        // Within a tick's refill (and a token's rounding) of the exact bucket.
        return admitted >= (ratePerSec * ms) / 1000 - ratePerSec / 1000 - 1
      }),
      { numRuns: 50 },
    )
  })

  it('stops its timer when nobody reads it, and a read wakes it with a fresh reading', () => {
    const source = new ManualClock(0)
    const coarse = new CoarseClock(source, 1)
    expect(coarse.running).toBe(true)
    coarse.now()
    source.advance(999)
    expect(coarse.running).toBe(true)
    source.advance(2)
    expect(coarse.running).toBe(false) // 1000 ticks without a read
    expect(source.pendingCount).toBe(0)
    source.advance(5000)
    expect(coarse.now()).toBe(6001) // not the stale 1001
    expect(coarse.running).toBe(true)
    source.advance(3)
    expect(coarse.now()).toBe(6004)
    coarse.close()
    expect(source.pendingCount).toBe(0)
    source.advance(10)
    expect(coarse.now()).toBe(6014)
    expect(coarse.running).toBe(false)
  })
})
