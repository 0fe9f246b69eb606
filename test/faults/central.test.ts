import fc from 'fast-check'
import { describe, expect, it } from 'vitest'
import { compare, replayCentral, type TraceEvent } from '../../bench/efficiency/central.js'
import { excessOverBound } from '../../bench/faults/measure.js'

const ev = (t: number, key: string, asked: number, admitted = 0, w = t): TraceEvent => ({
  t,
  w,
  key,
  asked,
  admitted,
})

describe('the central limiter of the efficiency bench', () => {
  it('is a token bucket per key, full at its first request', () => {
    const limit = { kind: 'rate', ratePerSec: 10, burst: 20 } as const
    // 25 at once: the burst; 500 ms later 5 more tokens; another key has its own bucket.
    const out = replayCentral(
      [ev(0, 'a', 25), ev(500, 'a', 10), ev(500, 'b', 3), ev(10_000, 'a', 30)],
      limit,
    )
    expect(out).toEqual([20, 5, 3, 20])
  })

  it('is a counter per key per window, windows aligned to the epoch', () => {
    const limit = { kind: 'quota', budget: 100, windowMs: 20_000 } as const
    const out = replayCentral(
      [ev(1, 'a', 60, 0, 19_000), ev(2, 'a', 60, 0, 19_500), ev(3, 'a', 60, 0, 20_000)],
      limit,
    )
    expect(out).toEqual([60, 40, 60])
  })

  it('replays in time order whatever order the gateways logged in', () => {
    const limit = { kind: 'rate', ratePerSec: 1, burst: 5 } as const
    expect(replayCentral([ev(100, 'a', 5), ev(0, 'a', 5)], limit)).toEqual([0, 5])
  })

  it('never admits a key past capacity·t + burst, and admits whatever fits (property)', () => {
    fc.assert(
      fc.property(
        fc.array(fc.tuple(fc.integer({ min: 0, max: 20_000 }), fc.integer({ min: 1, max: 30 })), {
          minLength: 1,
          maxLength: 200,
        }),
        (checks) => {
          const limit = { kind: 'rate', ratePerSec: 7, burst: 12 } as const
          const trace = checks.map(([t, n]) => ev(t, 'k', n))
          const out = replayCentral(trace, limit)
          const admissions = trace.map((e, i) => ({ t: e.t, n: out[i]! }))
          const first = Math.min(...trace.map((e) => e.t))
          expect(
            excessOverBound(admissions, [{ fromMs: first, capacity: 7 }], 12),
          ).toBeLessThanOrEqual(1e-6)
          // Exact: a check refused in part found less than a whole token left.
          expect(out.every((n, i) => n <= trace[i]!.asked)).toBe(true)
        },
      ),
    )
  })

  it('compares check by check: what the central limiter admitted and Sluice refused', () => {
    const limit = { kind: 'quota', budget: 10, windowMs: 1000 } as const
    const c = compare([ev(0, 'a', 8, 8), ev(1, 'a', 8, 0), ev(2, 'b', 4, 4)], limit)
    expect(c).toMatchObject({ asked: 20, admitted: 12, central: 14, centralOnly: 2 })
    expect(c.ratio).toBeCloseTo(12 / 14, 9)
  })
})
