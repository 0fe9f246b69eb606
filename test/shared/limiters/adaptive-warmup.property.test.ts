import fc from 'fast-check'
import { describe, expect, it } from 'vitest'
import { AdaptiveThrottle, WarmUpLimiter } from '../../../shared/limiters/index.js'
import { ManualClock } from '../../../shared/index.js'

describe('WarmUpLimiter, as properties', () => {
  // The rate is never above the ramp from a cold start at t = 0 (an idle spell only cools it
  // again), and tokens start at 0: so by any time t, admitted ≤ ∫₀ᵗ ramp.
  const ramp = (rate: number, cold: number, warmupMs: number, t: number): number => {
    // ∫₀ᵗ cold + (rate − cold)·min(1, s / warmup) ds, in tokens (t in ms, rates per second).
    const warm = Math.min(t, warmupMs)
    const rising = (cold * warm + ((rate - cold) * warm * warm) / (2 * warmupMs)) / 1000
    return rising + (rate * Math.max(0, t - warmupMs)) / 1000
  }

  it('never admits more, by any time, than the warm-up ramp from a cold start allows', () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 1, max: 500 }),
        fc.integer({ min: 100, max: 5000 }),
        fc.double({ min: 1, max: 10, noNaN: true }),
        fc.array(fc.tuple(fc.nat(300), fc.integer({ min: 1, max: 5 })), { maxLength: 200 }),
        (ratePerSec, warmupMs, coldFactor, seq) => {
          const clock = new ManualClock()
          const limiter = new WarmUpLimiter({ ratePerSec, warmupMs, coldFactor, clock })
          let admitted = 0
          for (const [wait, cost] of seq) {
            clock.advance(wait)
            if (limiter.tryAcquire(cost)) admitted += cost
            const bound = ramp(ratePerSec, ratePerSec / coldFactor, warmupMs, clock.now())
            expect(admitted).toBeLessThanOrEqual(bound + 1e-6 * Math.max(1, bound))
          }
        },
      ),
    )
  })

  it('under steady demand, reaches its full rate once warm', () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 10, max: 1000 }),
        fc.integer({ min: 100, max: 3000 }),
        (ratePerSec, warmupMs) => {
          const clock = new ManualClock()
          const limiter = new WarmUpLimiter({ ratePerSec, warmupMs, clock })
          // Ask every millisecond, for the warm-up and then one more second.
          for (let t = 0; t < warmupMs; t++) {
            clock.advance(1)
            limiter.tryAcquire(1)
          }
          let admitted = 0
          for (let t = 0; t < 1000; t++) {
            clock.advance(1)
            if (limiter.tryAcquire(1)) admitted++
          }
          expect(admitted).toBeGreaterThanOrEqual(Math.min(ratePerSec, 1000) * 0.98 - 1)
          expect(admitted).toBeLessThanOrEqual(ratePerSec + 1)
        },
      ),
    )
  })
})

describe('AdaptiveThrottle, against a reference model', () => {
  type Op = { kind: 'wait'; ms: number } | { kind: 'request'; u: number } | { kind: 'accept' }
  const op: fc.Arbitrary<Op> = fc.oneof(
    fc.record({ kind: fc.constant('wait' as const), ms: fc.integer({ min: 0, max: 4000 }) }),
    fc.record({
      kind: fc.constant('request' as const),
      u: fc.double({ min: 0, max: 0.999999, noNaN: true }),
    }),
    fc.record({ kind: fc.constant('accept' as const) }),
  )

  it('rejects with probability max(0, (requests − K·accepts) / (requests + 1)) over the window', () => {
    fc.assert(
      fc.property(
        fc.double({ min: 1, max: 4, noNaN: true }),
        fc.integer({ min: 1, max: 10 }),
        fc.array(op, { maxLength: 300 }),
        (k, windowSec, ops) => {
          const clock = new ManualClock()
          let u = 0
          const throttle = new AdaptiveThrottle({
            k,
            windowMs: windowSec * 1000,
            clock,
            random: () => u,
          })
          // The model: every event with the 1 s bucket it fell in; the window is the last
          // windowSec buckets, the current one included.
          const events: { bucket: number; kind: 'request' | 'accept' }[] = []
          const probability = (): number => {
            const now = Math.floor(clock.now() / 1000)
            let requests = 0
            let accepts = 0
            for (const e of events) {
              if (e.bucket <= now - windowSec) continue
              if (e.kind === 'request') requests++
              else accepts++
            }
            return Math.max(0, (requests - k * accepts) / (requests + 1))
          }
          for (const o of ops) {
            if (o.kind === 'wait') clock.advance(o.ms)
            else if (o.kind === 'accept') {
              throttle.recordAccept()
              events.push({ bucket: Math.floor(clock.now() / 1000), kind: 'accept' })
            } else {
              u = o.u
              const p = probability()
              expect(throttle.rejectProbability).toBeCloseTo(p, 12)
              expect(throttle.tryAcquire()).toBe(u >= p)
              events.push({ bucket: Math.floor(clock.now() / 1000), kind: 'request' })
            }
          }
          expect(throttle.rejectProbability).toBeCloseTo(probability(), 12)
        },
      ),
    )
  })
})
