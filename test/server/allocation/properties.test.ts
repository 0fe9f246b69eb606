import fc from 'fast-check'
import { describe, expect, it } from 'vitest'
import {
  allocate,
  type Algorithm,
  type AllocationProblem,
  type SurplusPolicy,
} from '../../../server/allocation/index.js'
import { problem } from '../../helpers/arbitraries.js'

// Floating-point tolerance, relative to the problem's scale (1e-9 as the design brief fixes).
function tolerance(p: AllocationProblem): number {
  let scale = Math.max(1, p.capacity)
  for (const c of p.clients) scale = Math.max(scale, c.wants)
  return 1e-9 * scale
}

const tenantKey = (tenant: string | undefined): string => tenant ?? '\u0000implicit'

function grantOf(p: AllocationProblem): Map<string, number> {
  const result = allocate(p)
  return new Map(result.ids.map((id, i) => [id, result.grants[i]!]))
}

function sum(values: Iterable<number>): number {
  let s = 0
  for (const v of values) s += v
  return s
}

function tenantTotals(p: AllocationProblem, grants: Map<string, number>): Map<string, number> {
  const totals = new Map<string, number>()
  for (const c of p.clients) {
    const key = tenantKey(c.tenant)
    totals.set(key, (totals.get(key) ?? 0) + grants.get(c.id)!)
  }
  return totals
}

function capOf(p: AllocationProblem, key: string): number {
  return p.tenants?.[key]?.cap ?? Infinity
}

/** Σ_t min(total wants of t, cap of t): what a work-conserving allocator must hand out, capped by C. */
function servable(p: AllocationProblem): number {
  const wants = new Map<string, number>()
  for (const c of p.clients)
    wants.set(tenantKey(c.tenant), (wants.get(tenantKey(c.tenant)) ?? 0) + c.wants)
  let total = 0
  for (const [key, w] of wants) total += Math.min(w, capOf(p, key))
  return Math.min(p.capacity, total)
}

function shuffled<T>(items: readonly T[], seed: number): T[] {
  const copy = [...items]
  let s = seed >>> 0 || 1
  for (let i = copy.length - 1; i > 0; i--) {
    s = (Math.imul(s, 1664525) + 1013904223) >>> 0
    const j = s % (i + 1)
    ;[copy[i], copy[j]] = [copy[j]!, copy[i]!]
  }
  return copy
}

const layeredShapes = [
  { label: 'flat', shape: { tenants: false, priorities: false } },
  { label: 'with tenants and caps', shape: { tenants: true, priorities: false } },
  { label: 'with priority bands', shape: { tenants: false, priorities: true } },
  { label: 'with tenants, caps and bands', shape: { tenants: true, priorities: true } },
] as const

const layeredAlgorithms: Algorithm[] = ['fair-share', 'proportional-share']

describe.each(layeredAlgorithms)('%s', (algorithm) => {
  describe.each(layeredShapes)('$label', ({ shape }) => {
    const hold = problem(shape, algorithm, 'hold')
    const spread = problem(shape, algorithm, 'spread')

    it('never grants a negative, NaN or infinite amount', () => {
      fc.assert(
        fc.property(fc.oneof(hold, spread), (p) => {
          for (const g of allocate(p).grants) expect(Number.isFinite(g) && g >= 0).toBe(true)
        }),
      )
    })

    it('never grants more than the capacity in total', () => {
      fc.assert(
        fc.property(fc.oneof(hold, spread), (p) => {
          expect(allocate(p).total).toBeLessThanOrEqual(p.capacity + tolerance(p))
          expect(sum(allocate(p).grants)).toBeLessThanOrEqual(p.capacity + tolerance(p))
        }),
      )
    })

    it('never grants a client more than it wants when surplus is held', () => {
      fc.assert(
        fc.property(hold, (p) => {
          const grants = grantOf(p)
          for (const c of p.clients)
            expect(grants.get(c.id)!).toBeLessThanOrEqual(c.wants + tolerance(p))
        }),
      )
    })

    it('is work-conserving: hands out min(capacity, demand within tenant caps)', () => {
      fc.assert(
        fc.property(hold, (p) => {
          expect(Math.abs(allocate(p).total - servable(p))).toBeLessThanOrEqual(
            tolerance(p) * (1 + p.clients.length),
          )
        }),
      )
    })

    it('never lets a tenant exceed its cap, surplus spread or held', () => {
      fc.assert(
        fc.property(fc.oneof(hold, spread), (p) => {
          for (const [key, total] of tenantTotals(p, grantOf(p))) {
            expect(total).toBeLessThanOrEqual(capOf(p, key) + tolerance(p))
          }
        }),
      )
    })

    it('does not depend on the order of clients', () => {
      fc.assert(
        fc.property(fc.oneof(hold, spread), fc.integer(), (p, seed) => {
          const before = grantOf(p)
          const after = grantOf({ ...p, clients: shuffled(p.clients, seed) })
          for (const c of p.clients) expect(after.get(c.id)!).toBeCloseTo(before.get(c.id)!, 6)
          for (const c of p.clients) {
            expect(Math.abs(after.get(c.id)! - before.get(c.id)!)).toBeLessThanOrEqual(
              tolerance(p) * 10,
            )
          }
        }),
      )
    })

    it('serves priority bands strictly: a lower band gets nothing while a higher client is short', () => {
      fc.assert(
        fc.property(hold, (p) => {
          const grants = grantOf(p)
          const totals = tenantTotals(p, grants)
          const tol = tolerance(p)
          for (const c of p.clients) {
            const short = grants.get(c.id)! < c.wants - tol
            const key = tenantKey(c.tenant)
            const tenantAtCap = totals.get(key)! >= capOf(p, key) - tol * p.clients.length
            if (!short || tenantAtCap) continue
            const lower = sum(
              p.clients
                .filter((o) => (o.priority ?? 0) < (c.priority ?? 0))
                .map((o) => grants.get(o.id)!),
            )
            expect(lower).toBeLessThanOrEqual(tol * p.clients.length)
          }
        }),
      )
    })

    it('spreads surplus only on top of the held grants, up to capacity or the tenant caps', () => {
      fc.assert(
        fc.property(spread, (p) => {
          const withSpread = grantOf(p)
          const held = grantOf({ ...p, surplus: 'hold' })
          const tol = tolerance(p)
          for (const c of p.clients)
            expect(withSpread.get(c.id)!).toBeGreaterThanOrEqual(held.get(c.id)! - tol)
          if (p.clients.length > 0) {
            const present = new Set(p.clients.map((c) => tenantKey(c.tenant)))
            const caps = sum([...present].map((key) => capOf(p, key)))
            expect(
              Math.abs(sum(withSpread.values()) - Math.min(p.capacity, caps)),
            ).toBeLessThanOrEqual(tol * (1 + p.clients.length))
          }
        }),
      )
    })
  })
})

describe('fair-share optimality and monotonicity', () => {
  const shapes = layeredShapes.map((s) => s.shape)
  const hold = fc.constantFrom(...shapes).chain((shape) => problem(shape, 'fair-share', 'hold'))

  it('is weighted max-min optimal: a client short of its wants has the highest grant/weight among its peers', () => {
    fc.assert(
      fc.property(hold, (p) => {
        const grants = grantOf(p)
        const tol = tolerance(p)
        for (const c of p.clients) {
          if (grants.get(c.id)! >= c.wants - tol) continue
          const level = grants.get(c.id)! / (c.weight ?? 1)
          for (const peer of p.clients) {
            if ((peer.priority ?? 0) !== (c.priority ?? 0) || peer.tenant !== c.tenant) continue
            const peerLevel = grants.get(peer.id)! / (peer.weight ?? 1)
            expect(peerLevel).toBeLessThanOrEqual(
              level + tol / Math.min(c.weight ?? 1, peer.weight ?? 1),
            )
          }
        }
      }),
    )
  })

  it('is weighted max-min optimal between tenants: a short tenant has the highest grant/weight', () => {
    fc.assert(
      fc.property(problem({ tenants: true, priorities: false }, 'fair-share', 'hold'), (p) => {
        const grants = grantOf(p)
        const totals = tenantTotals(p, grants)
        const tol = tolerance(p) * (1 + p.clients.length)
        const wants = new Map<string, number>()
        for (const c of p.clients)
          wants.set(tenantKey(c.tenant), (wants.get(tenantKey(c.tenant)) ?? 0) + c.wants)
        const weightOf = (key: string): number => p.tenants?.[key]?.weight ?? 1
        for (const [key, total] of totals) {
          if (total >= Math.min(wants.get(key)!, capOf(p, key)) - tol) continue
          for (const [other, otherTotal] of totals) {
            expect(otherTotal / weightOf(other)).toBeLessThanOrEqual(
              total / weightOf(key) + tol / Math.min(weightOf(key), weightOf(other)),
            )
          }
        }
      }),
    )
  })

  it('is monotone in capacity: no client loses when capacity grows', () => {
    fc.assert(
      fc.property(
        hold,
        fc.double({ min: 0, max: 1e6, noNaN: true, noDefaultInfinity: true }),
        (p, extra) => {
          const before = grantOf(p)
          const bigger = { ...p, capacity: p.capacity + extra }
          const after = grantOf(bigger)
          for (const c of p.clients)
            expect(after.get(c.id)!).toBeGreaterThanOrEqual(before.get(c.id)! - tolerance(bigger))
        },
      ),
    )
  })

  it('is monotone in a client’s own wants, and others never gain when one client wants more', () => {
    fc.assert(
      fc.property(
        hold.filter((p) => p.clients.length > 0),
        fc.nat(),
        fc.double({ min: 0, max: 1e6, noNaN: true, noDefaultInfinity: true }),
        (p, pick, extra) => {
          const k = pick % p.clients.length
          const grown = {
            ...p,
            clients: p.clients.map((c, i) => (i === k ? { ...c, wants: c.wants + extra } : c)),
          }
          const before = grantOf(p)
          const after = grantOf(grown)
          const tol = tolerance(grown) * (1 + p.clients.length)
          p.clients.forEach((c, i) => {
            if (i === k) expect(after.get(c.id)!).toBeGreaterThanOrEqual(before.get(c.id)! - tol)
            else expect(after.get(c.id)!).toBeLessThanOrEqual(before.get(c.id)! + tol)
          })
        },
      ),
    )
  })
})

describe.each<{ algorithm: Algorithm; surplus: SurplusPolicy }>([
  { algorithm: 'static', surplus: 'spread' },
  { algorithm: 'none', surplus: 'hold' },
])('$algorithm', ({ algorithm }) => {
  it(
    algorithm === 'static'
      ? 'grants min(wants, capacity) per client'
      : 'grants exactly what each client wants',
    () => {
      fc.assert(
        fc.property(problem({ tenants: true, priorities: true }, algorithm, 'spread'), (p) => {
          const grants = grantOf(p)
          for (const c of p.clients) {
            expect(grants.get(c.id)).toBe(
              algorithm === 'static' ? Math.min(c.wants, p.capacity) : c.wants,
            )
          }
        }),
      )
    },
  )
})
