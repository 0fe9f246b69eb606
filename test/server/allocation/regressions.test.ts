import { describe, expect, it } from 'vitest'
import { allocate, type AllocationProblem } from '../../../server/allocation/index.js'

// Counterexamples fast-check found; each once produced a negative or NaN grant.
const cases: Array<{ name: string; problem: AllocationProblem }> = [
  {
    name: 'a tenant cap consumed a hair beyond itself by rounding left negative room for the surplus',
    problem: {
      capacity: 29.000000000000007,
      algorithm: 'proportional-share',
      surplus: 'spread',
      tenants: { a: { cap: 0 }, b: { cap: 29 }, c: {} },
      clients: [
        { wants: 0, tenant: 'b', id: 'client-0' },
        { wants: 2, weight: 9, tenant: 'b', id: 'client-1' },
        { wants: 0, id: 'client-2' },
        { wants: 0, tenant: 'b', id: 'client-3' },
        { wants: 28, tenant: 'b', id: 'client-4' },
      ],
    },
  },
  {
    name: 'subnormal capacity and caps with a heavy client',
    problem: {
      capacity: 9.74607526870683e-301,
      algorithm: 'fair-share',
      surplus: 'spread',
      tenants: { a: { cap: 9.746075268706827e-301 }, b: {}, c: {} },
      clients: [
        { wants: 3.4407099527423233e-304, weight: 0.001, tenant: 'a', id: 'client-0' },
        { wants: 0, id: 'client-1' },
        { wants: 0, tenant: 'a', id: 'client-2' },
        { wants: 1, tenant: 'a', id: 'client-3' },
        { wants: 4.871317279377043e-301, tenant: 'a', id: 'client-4' },
      ],
    },
  },
  {
    name: 'subnormal capacity split over tenants and bands',
    problem: {
      capacity: 7.4e-323,
      algorithm: 'fair-share',
      surplus: 'spread',
      tenants: { a: { cap: 5.4e-323 }, b: {}, c: {} },
      clients: [
        { wants: 0, id: 'client-0' },
        { wants: 0, weight: 1.5000000000000002, tenant: 'a', id: 'client-1' },
        { wants: 1e-323, tenant: 'a', id: 'client-2' },
        { wants: 6e-323, weight: 6, tenant: 'a', id: 'client-3' },
      ],
    },
  },
]

describe('allocation regressions', () => {
  it.each(cases)('never grants a negative or NaN amount when $name', ({ problem }) => {
    const result = allocate(problem)
    for (const g of result.grants) expect(Number.isFinite(g) && g >= 0).toBe(true)
    expect(result.total).toBeLessThanOrEqual(problem.capacity * (1 + 1e-9) + 1e-300)
  })
})
