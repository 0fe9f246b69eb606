import fc from 'fast-check'
import { describe, expect, it } from 'vitest'
import { lateBatch } from '../../../server/coordinator/late-batch.js'
import type { LeaseBatch } from '../../../server/pool/index.js'
import type { LeaseGrant } from '../../../shared/index.js'

const grant = fc.record({
  ttlMs: fc.oneof(fc.constant(0), fc.integer({ min: 1, max: 20_000 })),
  capacity: fc.double({ min: 0, max: 1_000, noNaN: true }),
  endsInMs: fc.option(fc.integer({ min: 0, max: 30_000 }), { nil: undefined }),
})

function batchOf(
  gs: readonly { ttlMs: number; capacity: number; endsInMs?: number | undefined }[],
): LeaseBatch {
  const leases: LeaseGrant[] = gs.map((g, i) => ({
    resource: `r${i}`,
    kind: 'rate',
    capacity: g.capacity,
    burst: g.capacity,
    ttlMs: g.ttlMs,
    refreshMs: 500,
    safeCapacity: g.capacity / 2,
    safeHoldMs: 1_000,
    ...(g.endsInMs === undefined
      ? {}
      : { window: { index: 7, endsInMs: g.endsInMs, quota: 100, lengthMs: 60_000 } }),
  }))
  return { clientKey: 'c', seq: 3, leases }
}

describe('a lease batch sent late (late-batch.ts)', () => {
  it('never lets a lease live past what was counted, and sends it whenever some life is left', () => {
    fc.assert(
      fc.property(
        fc.array(grant, { minLength: 1, maxLength: 5 }),
        fc.double({ min: 0.001, max: 25_000, noNaN: true }),
        (gs, lateMs) => {
          const batch = batchOf(gs)
          const before = structuredClone(batch)
          const out = lateBatch(batch, lateMs)
          expect(batch).toEqual(before)
          const lived = gs.filter((g) => g.ttlMs > 0)
          if (lived.some((g) => g.ttlMs <= Math.ceil(lateMs))) {
            expect(out).toBeUndefined()
            return
          }
          expect(out).toBeDefined()
          expect(out!.seq).toBe(batch.seq)
          out!.leases.forEach((l, i) => {
            const was = batch.leases[i]!
            // Counted from `made + limit`; it leaves at `made + limit + lateMs`: it ends by then.
            if (was.ttlMs > 0) expect(lateMs + l.ttlMs).toBeLessThanOrEqual(was.ttlMs)
            else expect(l.ttlMs).toBe(0)
            expect(l.ttlMs).toBeGreaterThanOrEqual(0)
            expect({ ...l, ttlMs: 0, window: undefined }).toEqual({
              ...was,
              ttlMs: 0,
              window: undefined,
            })
            if (was.window !== undefined && was.ttlMs > 0)
              expect(l.window!.endsInMs).toBe(Math.max(0, was.window.endsInMs - Math.ceil(lateMs)))
          })
        },
      ),
    )
  })

  it('leaves a batch that is not late as it is', () => {
    const batch = batchOf([{ ttlMs: 1_000, capacity: 5 }])
    expect(lateBatch(batch, 0)).toBe(batch)
  })
})
