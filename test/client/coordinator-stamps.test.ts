import fc from 'fast-check'
import { describe, expect, it } from 'vitest'
import { CoordinatorStamps } from '../../client/coordinator-stamps.js'
import { clockDriftShare } from '../../shared/index.js'

describe('CoordinatorStamps: a coordinator time placed from the quickest batch (#41)', () => {
  it('places from the batch itself when it is the only one, or the quickest', () => {
    const stamps = new CoordinatorStamps()
    stamps.note(5_000, 1_000)
    expect(stamps.placeAfter(1_000, 5_000, 100)).toBe(100)
    // 500 ms on, a batch as quick as the first: its own placement stands (the first pays drift).
    stamps.note(5_500, 1_500)
    expect(stamps.placeAfter(1_500, 5_500, 100)).toBe(100)
  })

  it('places sooner from an earlier batch that came quicker, by its delay less drift and a ms', () => {
    const stamps = new CoordinatorStamps()
    stamps.note(5_000, 1_000)
    // Sent at 1,480, handled at 5,500: 20 ms slower than the first. 1,580 from the first:
    // 5,000 + (580 + 1) × 1.001 = 5,581.58, 82 ms after this one came (not 100).
    stamps.note(5_500, 1_480)
    expect(stamps.placeAfter(1_480, 5_500, 100)).toBe(82)
  })

  it('forgets every batch at a new connection (another coordinator’s clock)', () => {
    const stamps = new CoordinatorStamps()
    stamps.note(5_000, 1_000)
    stamps.reset()
    // Stamped on another clock: 1,480 there says nothing of the first batch.
    stamps.note(5_500, 1_480)
    expect(stamps.placeAfter(1_480, 5_500, 100)).toBe(100)
  })

  it('keeps the newest eight', () => {
    const stamps = new CoordinatorStamps()
    stamps.note(0, 0) // the quickest, then pushed out by eight slower ones
    for (let i = 1; i <= 8; i++) stamps.note(i * 1_000 + 50, i * 1_000)
    // From the first it would be 8,000 + 100 + drift + 1; the newest eight are all 50 ms slow.
    expect(stamps.placeAfter(8_000, 8_050, 100)).toBe(100)
  })

  it('never places the time sooner than it comes on this process’s clock, whatever the delays and drift', () => {
    fc.assert(
      fc.property(
        // The client's clock: an offset from the coordinator's, running at rate ∈ [1 − δ, 1 + δ].
        fc.double({ min: -1e6, max: 1e6, noNaN: true }),
        fc.double({ min: -clockDriftShare, max: clockDriftShare, noNaN: true }),
        // Batches: the gap since the one before (coordinator ms) and each one's delay (client ms).
        fc.array(
          fc.record({
            gapMs: fc.double({ min: 0, max: 5_000, noNaN: true }),
            delayMs: fc.double({ min: 0, max: 200, noNaN: true }),
          }),
          { minLength: 1, maxLength: 20 },
        ),
        // The time placed, as the coordinator says it: whole ms after the last batch left,
        // stretched by the drift (its part: server/pool/lease-out.ts, nextPart). The time
        // itself is the latest that allows: `inMs` ÷ (1 + δ) after the sending.
        fc.integer({ min: 0, max: 10_000 }),
        (offsetMs, drift, batches, inMs) => {
          const leadMs = inMs / (1 + clockDriftShare)
          const clientAt = (coordMs: number): number => offsetMs + coordMs * (1 + drift)
          const stamps = new CoordinatorStamps()
          let sentMs = 1_000
          let lastReceived = 0
          let lastAt = 0
          for (const b of batches) {
            sentMs += b.gapMs
            lastAt = Math.floor(sentMs)
            lastReceived = clientAt(sentMs) + b.delayMs
            stamps.note(lastReceived, lastAt)
          }
          const placed = stamps.placeAfter(lastAt, lastReceived, inMs)
          expect(placed).toBeLessThanOrEqual(inMs)
          expect(lastReceived + placed).toBeGreaterThanOrEqual(clientAt(sentMs + leadMs) - 1e-6)
        },
      ),
    )
  })
})
