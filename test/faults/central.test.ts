import fc from 'fast-check'
import { describe, expect, it } from 'vitest'
import { compare, replayCentral, type TraceEvent } from '../../bench/efficiency/central.js'
import { efficiencyRow, efficiencySplit, keyAtLimit, measure } from '../../bench/efficiency/run.js'
import type { EfficiencyScenario } from '../../bench/efficiency/scenarios.js'
import { rankBand, splitLosses } from '../../bench/efficiency/split.js'
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

describe('where the efficiency bench finds Sluice short (BENCH_SPLIT=1)', () => {
  it('groups each check under every label it has, and counts what the central limiter admitted that Sluice refused', () => {
    const limit = { kind: 'rate', ratePerSec: 1, burst: 2 } as const
    // k0 asked 3 at once (central 2, Sluice 1), then 1 a second later (central 1, Sluice 1);
    // k12 asked 1 (central 1, Sluice 0); k400 asked 1 and admitted by both.
    const trace = [ev(0, 'k0', 3, 1), ev(1000, 'k0', 1, 1), ev(0, 'k12', 1, 0), ev(0, 'k400', 1, 1)]
    const central = replayCentral(trace, limit)
    expect(central).toEqual([2, 1, 1, 1])
    const rows = splitLosses(trace, central, (e, i) => [
      rankBand(e.key),
      i % 2 === 0 ? 'even' : 'odd',
    ])
    expect(rows).toEqual([
      { label: 'even', asked: 4, admitted: 1, central: 3, lost: 2 },
      { label: 'keys: rank   0-9', asked: 4, admitted: 2, central: 3, lost: 1 },
      { label: 'keys: rank  10-29', asked: 1, admitted: 0, central: 1, lost: 1 },
      { label: 'keys: rank 300+', asked: 1, admitted: 1, central: 1, lost: 0 },
      { label: 'odd', asked: 2, admitted: 2, central: 2, lost: 0 },
    ])
    // Sluice admitting more than central at one check does not make up for another's loss.
    expect(splitLosses([ev(0, 'a', 2, 2), ev(0, 'a', 2, 0)], [0, 2], () => ['all'])).toEqual([
      { label: 'all', asked: 4, admitted: 2, central: 2, lost: 2 },
    ])
    // Crossed (BENCH_SPLIT_CROSS=1): each process's checks by key rank as well.
    const scenario = { name: 'x', kind: 'rate' } as EfficiencyScenario
    const crossed = efficiencySplit(scenario, trace, central, [0, 0, 1, 1], 5000, true)
    expect(crossed.find((r) => r.label === 'process 1, keys: rank  10-29')).toEqual({
      label: 'process 1, keys: rank  10-29',
      asked: 1,
      admitted: 0,
      central: 1,
      lost: 1,
    })
    expect(crossed.find((r) => r.label === 'process 0, keys: rank   0-9')?.lost).toBe(1)
    expect(
      efficiencySplit(scenario, trace, central, [0, 0, 1, 1]).some((r) => r.label.includes(', ')),
    ).toBe(false)
    expect([rankBand('k30'), rankBand('k299'), rankBand('customer')]).toEqual([
      'keys: rank  30-99',
      'keys: rank 100-299',
      'keys: other',
    ])
  })
})

describe("the efficiency bench's first checks at a young gateway", () => {
  // A quota of 2 per key per window. Process 0 spends key a (2 of 2); then process 1, just
  // joined, checks a for the first time (refused: the central counter refuses it too) and b for
  // the first time (refused: the central counter would admit it, a loss of Sluice's).
  const scenario: EfficiencyScenario = {
    name: 'test',
    kind: 'quota',
    capacity: 2,
    windowMs: 60_000,
    processes: 2,
    gatewaysPerProcess: 1,
    keys: 2,
    ratePerSec: 1,
    durationMs: 1000,
  }
  const line = (t: number, o: Record<string, unknown>) => JSON.stringify({ t, w: t, ...o })
  const outputs = [
    [
      line(10, { a: { a: 2 }, r: {}, q: { 'a@0': 2 }, f: [1, 1], y: [0, 0] }),
      line(20, { a: { b: 1 }, r: {}, q: { 'b@0': 1 }, f: [1, 1], y: [0, 0] }),
    ].join('\n'),
    [
      line(30, { a: {}, r: { a: 1, b: 1 }, q: {}, f: [0, 0], y: [2, 0], yr: ['a', 'b'] }),
      line(40, { a: { b: 1 }, r: {}, q: { 'b@0': 1 }, f: [0, 0], y: [0, 0] }),
    ].join('\n'),
  ]

  it('counts a refusal the central limiter makes too apart, and the rest against Sluice', () => {
    const r = measure(scenario, outputs)
    expect(r.youngChecks).toBe(2)
    expect(r.youngAdmitted).toBe(0)
    // Of the two, only b would the central counter admit: 0 of 1.
    expect(r.youngFair).toEqual({ checks: 1, admitted: 0 })
    expect(r.firstFair).toEqual({ checks: 2, admitted: 2 })
    expect(efficiencyRow(r)).toContain('0.0% of 2 (0.0% of 1 it admits)')
    // b's budget ran out at 40 (its third check), within 100 ms of the refusal at 30: at its
    // limit then, as a, so neither counts among the keys within their limit.
    expect(r.youngWithin).toEqual({ checks: 0, admitted: 0 })
  })

  it('judges first checks at keys within their limit apart: none refused near them centrally', () => {
    // A rate of 10/s, burst 1 per key. Key a: at 0 and 50 (the second refused by the central
    // bucket: at its limit). A young process checks a first at 60 (refused by Sluice: a's bucket
    // was dry 10 ms before, so not within its limit), and c first at 1000 (refused, no central
    // refusal of c ever: a loss) and d (admitted).
    const rate: EfficiencyScenario = { ...scenario, kind: 'rate', capacity: 10, burst: 1 }
    const rateOutputs = [
      [
        line(0, { a: { a: 1 }, r: {}, f: [1, 1], y: [0, 0] }),
        line(50, { a: {}, r: { a: 1 }, f: [0, 0], y: [0, 0] }),
      ].join('\n'),
      [
        line(60, { a: {}, r: { a: 1 }, f: [0, 0], y: [1, 0], yr: ['a'] }),
        line(1000, { a: { d: 1 }, r: { c: 1 }, f: [0, 0], y: [2, 1], yr: ['c'], ya: ['d'] }),
      ].join('\n'),
    ]
    const r = measure(rate, rateOutputs)
    expect(r.youngChecks).toBe(3)
    expect(r.youngWithin).toEqual({ checks: 2, admitted: 1 })
    expect(efficiencyRow(r)).toContain('50.0% of 2 at keys within their limit')
    const trace = [
      { t: 0, w: 0, key: 'a', asked: 1, admitted: 1 },
      { t: 1000, w: 0, key: 'a', asked: 2, admitted: 0 },
      { t: 1099, w: 0, key: 'a', asked: 1, admitted: 1 },
      { t: 1101, w: 0, key: 'a', asked: 1, admitted: 1 },
      { t: 900, w: 0, key: 'b', asked: 1, admitted: 1 },
    ]
    // The central limiter refused one of a's at 1000 (and nothing else).
    const atLimit = keyAtLimit(trace, [1, 1, 1, 1, 1], 100)
    expect([0, 1, 2, 3, 4].map(atLimit)).toEqual([false, true, true, false, false])
  })

  it('replays a remote check when it was asked, however long its answer waited, and bounds its admission where the answer came', () => {
    // A rate of 10/s, burst 1. Key a admitted at 0; a remote check of a asked at 50, answered
    // (admitted) 1,000 ms later (it waited, e.g. for a coordinator's restart). The central
    // limiter, asked at 50, refuses it (half a token): Sluice admitted one it would not. The
    // bound holds (one admission at 0, one at 1,050). Judged at the answer, the central
    // limiter would have admitted it, and two admissions 50 ms apart would break the bound.
    const rate: EfficiencyScenario = { ...scenario, kind: 'rate', capacity: 10, burst: 1 }
    const outputs = [
      [
        line(0, { a: { a: 1 }, r: {}, f: [0, 0], y: [0, 0] }),
        line(50, { dt: 1000, a: { a: 1 }, r: {}, f: [0, 0], y: [0, 0] }),
      ].join('\n'),
    ]
    const r = measure(rate, outputs)
    expect(r.admitted).toBe(2)
    expect(r.central).toBe(1)
    expect(r.keysOver).toBe(0)
    const early = measure(rate, [outputs[0]!.replace('"dt":1000,', '')])
    expect(early.keysOver).toBe(1)
  })
})
