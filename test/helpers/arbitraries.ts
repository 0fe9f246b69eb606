import fc from 'fast-check'
import type { AllocationProblem, ClientDemand, TenantSpec } from '../../server/allocation/index.js'

/** A quantity (capacity, wants, cap) with a fair chance of zeros, small values and ties. */
export const quantity = fc.oneof(
  { weight: 1, arbitrary: fc.constant(0) },
  { weight: 2, arbitrary: fc.integer({ min: 0, max: 100 }) },
  {
    weight: 3,
    arbitrary: fc.double({ min: 0, max: 10_000, noNaN: true, noDefaultInfinity: true }),
  },
  { weight: 1, arbitrary: fc.double({ min: 0, max: 1e9, noNaN: true, noDefaultInfinity: true }) },
)

export const weight = fc.oneof(
  { weight: 3, arbitrary: fc.constant(1) },
  { weight: 2, arbitrary: fc.integer({ min: 1, max: 10 }) },
  {
    weight: 2,
    arbitrary: fc.double({ min: 0.001, max: 1000, noNaN: true, noDefaultInfinity: true }),
  },
)

const tenantNames = ['a', 'b', 'c'] as const

export interface ProblemShape {
  tenants: boolean
  priorities: boolean
  maxClients?: number
}

/** Allocation problems with unique ids, optional tenants (with caps) and priority bands. */
export function problem(
  shape: ProblemShape,
  algorithm: AllocationProblem['algorithm'],
  surplus: AllocationProblem['surplus'],
): fc.Arbitrary<AllocationProblem> {
  const tenantSpec: fc.Arbitrary<TenantSpec> = fc.record(
    { weight, cap: quantity },
    { requiredKeys: [] },
  )
  const tenants = shape.tenants
    ? fc.record({ a: tenantSpec, b: tenantSpec, c: tenantSpec })
    : fc.constant(undefined)
  const client = fc.record(
    {
      wants: quantity,
      weight,
      priority: shape.priorities ? fc.integer({ min: -1, max: 2 }) : fc.constant(0),
      tenant: shape.tenants ? fc.constantFrom(...tenantNames, undefined) : fc.constant(undefined),
    },
    { requiredKeys: ['wants'] },
  )
  return fc
    .record({
      capacity: quantity,
      tenants,
      clients: fc.array(client, { minLength: 0, maxLength: shape.maxClients ?? 12 }),
    })
    .map(({ capacity, tenants: t, clients }) => ({
      capacity,
      algorithm,
      surplus,
      ...(t === undefined ? {} : { tenants: t }),
      clients: clients.map((c, i): ClientDemand => ({ ...c, id: `client-${i}` })),
    }))
}
