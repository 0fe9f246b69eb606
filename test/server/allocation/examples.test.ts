import { describe, expect, it } from 'vitest'
import {
  allocate,
  grantsById,
  type AllocationProblem,
  type ClientDemand,
} from '../../../server/allocation/index.js'

function grants(
  problem: Omit<AllocationProblem, 'clients'>,
  clients: Array<Omit<ClientDemand, 'id'>>,
): number[] {
  const result = allocate({ ...problem, clients: clients.map((c, i) => ({ id: `c${i}`, ...c })) })
  return Array.from(result.grants)
}

function expectClose(actual: number[], expected: number[], digits = 9): void {
  expect(actual).toHaveLength(expected.length)
  actual.forEach((a, i) => expect(a).toBeCloseTo(expected[i]!, digits))
}

describe('fair-share worked examples (surplus hold)', () => {
  const hold = { capacity: 120, surplus: 'hold' } as const

  it('caps the greedy client at the level once the small ones are met: 1000/50/10 of 120 → 60/50/10', () => {
    expectClose(grants(hold, [{ wants: 1000 }, { wants: 50 }, { wants: 10 }]), [60, 50, 10])
  })

  it('shares the level between two unsatisfied clients: 1000/60/10 of 120 → 55/55/10', () => {
    expectClose(grants(hold, [{ wants: 1000 }, { wants: 60 }, { wants: 10 }]), [55, 55, 10])
  })

  it('splits by weight when nobody is satisfied: 1000w6/500w4/200w2 of 120 → 60/40/20', () => {
    expectClose(
      grants(hold, [
        { wants: 1000, weight: 6 },
        { wants: 500, weight: 4 },
        { wants: 200, weight: 2 },
      ]),
      [60, 40, 20],
    )
  })

  it('does not over-grant where Doorman does: 100 over 0.000001/24/25.2/1000/1000', () => {
    expectClose(
      grants({ capacity: 100, surplus: 'hold' }, [
        { wants: 0.000001 },
        { wants: 24 },
        { wants: 25.2 },
        { wants: 1000 },
        { wants: 1000 },
      ]),
      [0.000001, 24, 25.2, 25.3999995, 25.3999995],
    )
  })

  it('does not strand capacity where Doorman does: 120 over 1000w1/90w4/0w1 → 30/90/0', () => {
    expectClose(
      grants(hold, [
        { wants: 1000, weight: 1 },
        { wants: 90, weight: 4 },
        { wants: 0, weight: 1 },
      ]),
      [30, 90, 0],
    )
  })
})

describe('proportional-share worked example', () => {
  it('gives the leftover in proportion to unmet demand: 1000/50/10 of 120 → 69.69/40.31/10', () => {
    const got = grants({ capacity: 120, surplus: 'hold', algorithm: 'proportional-share' }, [
      { wants: 1000 },
      { wants: 50 },
      { wants: 10 },
    ])
    expectClose(got, [40 + (30 * 960) / 970, 40 + (30 * 10) / 970, 10])
    expect(got[0]).toBeCloseTo(69.6907, 4)
    expect(got[1]).toBeCloseTo(40.3093, 4)
  })
})

describe('layers', () => {
  it('serves a higher priority band first', () => {
    expectClose(
      grants({ capacity: 100, surplus: 'hold' }, [
        { wants: 80, priority: 1 },
        { wants: 80, priority: 0 },
        { wants: 80, priority: 0 },
      ]),
      [80, 10, 10],
    )
  })

  it('splits between tenants by weight before splitting inside a tenant', () => {
    const got = grants(
      { capacity: 120, surplus: 'hold', tenants: { a: { weight: 2 }, b: { weight: 1 } } },
      [
        { wants: 1000, tenant: 'a' },
        { wants: 1000, tenant: 'a' },
        { wants: 1000, tenant: 'b' },
      ],
    )
    expectClose(got, [40, 40, 40])
  })

  it('bounds a tenant by its cap across all bands, and gives the rest to others', () => {
    const got = grants({ capacity: 100, surplus: 'hold', tenants: { a: { cap: 30 }, b: {} } }, [
      { wants: 20, tenant: 'a', priority: 1 },
      { wants: 50, tenant: 'a', priority: 0 },
      { wants: 100, tenant: 'b', priority: 0 },
    ])
    expectClose(got, [20, 10, 70])
  })

  it('puts clients without a tenant in one implicit tenant of weight 1', () => {
    const got = grants({ capacity: 90, surplus: 'hold', tenants: { a: { weight: 2 } } }, [
      { wants: 1000, tenant: 'a' },
      { wants: 1000 },
      { wants: 1000 },
    ])
    expectClose(got, [60, 15, 15])
  })
})

describe('surplus', () => {
  it('spreads leftover capacity by weight when demand is below capacity', () => {
    const got = grants({ capacity: 100 }, [
      { wants: 10, weight: 1 },
      { wants: 30, weight: 3 },
    ])
    expectClose(got, [25, 75])
  })

  it('holds leftover capacity in the pool with surplus hold', () => {
    expectClose(
      grants({ capacity: 100, surplus: 'hold' }, [{ wants: 10 }, { wants: 30 }]),
      [10, 30],
    )
  })

  it('spreads only within tenant caps, so a capped tenant’s share flows to the others', () => {
    const got = grants({ capacity: 100, tenants: { a: { cap: 20 }, b: {} } }, [
      { wants: 10, tenant: 'a' },
      { wants: 10, tenant: 'b' },
    ])
    expectClose(got, [20, 80])
  })
})

describe('static and none', () => {
  it('static grants min(wants, capacity) to every client', () => {
    expectClose(
      grants({ capacity: 50, algorithm: 'static' }, [{ wants: 10 }, { wants: 80 }]),
      [10, 50],
    )
  })

  it('none grants what each client wants', () => {
    expectClose(
      grants({ capacity: 1, algorithm: 'none' }, [{ wants: 10 }, { wants: 80 }]),
      [10, 80],
    )
  })

  it('returns grants keyed by client id', () => {
    const result = allocate({
      capacity: 10,
      clients: [
        { id: 'x', wants: 4 },
        { id: 'y/z', wants: 6 },
      ],
    })
    expect(grantsById(result)).toEqual({ x: 4, 'y/z': 6 })
  })
})
