import fc from 'fast-check'
import { describe, expect, it } from 'vitest'
import { allocate, type AllocationProblem } from '../../../server/allocation/index.js'
import { SluiceError, type ErrorCode } from '../../../shared/index.js'

function rejection(problem: unknown): SluiceError {
  try {
    allocate(problem as AllocationProblem)
  } catch (error) {
    expect(error).toBeInstanceOf(SluiceError)
    return error as SluiceError
  }
  throw new Error('allocate accepted invalid input')
}

const base = (): {
  capacity: number
  tenants: Record<string, object>
  clients: Record<string, unknown>[]
} => ({
  capacity: 100,
  tenants: { a: { weight: 2, cap: 50 } },
  clients: [
    { id: 'x', wants: 10 },
    { id: 'y', wants: 20, tenant: 'a' },
  ],
})

describe('allocation input validation', () => {
  const invalid: Array<{
    what: string
    mutate: (p: ReturnType<typeof base>) => void
    code: ErrorCode
    field: string
  }> = [
    {
      what: 'NaN capacity',
      mutate: (p) => (p.capacity = NaN),
      code: 'SLUICE_ERR_ALLOC_INVALID_NUMBER',
      field: 'capacity',
    },
    {
      what: 'infinite capacity',
      mutate: (p) => (p.capacity = Infinity),
      code: 'SLUICE_ERR_ALLOC_INVALID_NUMBER',
      field: 'capacity',
    },
    {
      what: 'negative capacity',
      mutate: (p) => (p.capacity = -1),
      code: 'SLUICE_ERR_ALLOC_INVALID_NUMBER',
      field: 'capacity',
    },
    {
      what: 'negative wants',
      mutate: (p) => (p.clients[1]!.wants = -5),
      code: 'SLUICE_ERR_ALLOC_INVALID_NUMBER',
      field: 'clients[1].wants',
    },
    {
      what: 'NaN wants',
      mutate: (p) => (p.clients[0]!.wants = NaN),
      code: 'SLUICE_ERR_ALLOC_INVALID_NUMBER',
      field: 'clients[0].wants',
    },
    {
      what: '-Infinity wants',
      mutate: (p) => (p.clients[0]!.wants = -Infinity),
      code: 'SLUICE_ERR_ALLOC_INVALID_NUMBER',
      field: 'clients[0].wants',
    },
    {
      what: 'zero weight',
      mutate: (p) => (p.clients[0]!.weight = 0),
      code: 'SLUICE_ERR_ALLOC_INVALID_NUMBER',
      field: 'clients[0].weight',
    },
    {
      what: 'negative weight',
      mutate: (p) => (p.clients[1]!.weight = -1),
      code: 'SLUICE_ERR_ALLOC_INVALID_NUMBER',
      field: 'clients[1].weight',
    },
    {
      what: 'fractional priority',
      mutate: (p) => (p.clients[0]!.priority = 0.5),
      code: 'SLUICE_ERR_ALLOC_INVALID_NUMBER',
      field: 'clients[0].priority',
    },
    {
      what: 'zero tenant weight',
      mutate: (p) => (p.tenants.a = { weight: 0 }),
      code: 'SLUICE_ERR_ALLOC_INVALID_NUMBER',
      field: 'tenants.a.weight',
    },
    {
      what: 'negative tenant cap',
      mutate: (p) => (p.tenants.a = { cap: -3 }),
      code: 'SLUICE_ERR_ALLOC_INVALID_NUMBER',
      field: 'tenants.a.cap',
    },
    {
      what: 'duplicate client ids',
      mutate: (p) => (p.clients[1]!.id = 'x'),
      code: 'SLUICE_ERR_ALLOC_DUPLICATE_CLIENT',
      field: 'clients[1].id',
    },
    {
      what: 'an empty client id',
      mutate: (p) => (p.clients[1]!.id = ''),
      code: 'SLUICE_ERR_ALLOC_INVALID_INPUT',
      field: 'clients[1].id',
    },
    {
      what: 'an unknown tenant',
      mutate: (p) => (p.clients[0]!.tenant = 'zz'),
      code: 'SLUICE_ERR_ALLOC_UNKNOWN_TENANT',
      field: 'clients[0].tenant',
    },
    {
      what: 'an unknown algorithm',
      mutate: (p) => Object.assign(p, { algorithm: 'doorman' }),
      code: 'SLUICE_ERR_ALLOC_UNKNOWN_ALGORITHM',
      field: 'algorithm',
    },
    {
      what: 'an unknown surplus policy',
      mutate: (p) => Object.assign(p, { surplus: 'keep' }),
      code: 'SLUICE_ERR_ALLOC_INVALID_INPUT',
      field: 'surplus',
    },
    {
      what: 'clients that are not an array',
      mutate: (p) => Object.assign(p, { clients: 'x' }),
      code: 'SLUICE_ERR_ALLOC_INVALID_INPUT',
      field: 'clients',
    },
  ]

  it.each(invalid)('rejects $what with $code naming $field', ({ mutate, code, field }) => {
    const p = base()
    mutate(p)
    const error = rejection(p)
    expect(error.code).toBe(code)
    expect(error.message).toContain(field)
    expect(error.retryable).toBe(false)
  })

  it('names the value it received', () => {
    const p = base()
    p.clients[0]!.wants = -7
    expect(rejection(p).message).toMatch(/received -7/)
  })

  it('rejects any non-finite or negative number anywhere instead of returning a NaN', () => {
    const bad = fc.constantFrom(NaN, Infinity, -Infinity, -1, -1e-9, 1e300)
    fc.assert(
      fc.property(bad, fc.constantFrom('capacity', 'wants', 'weight', 'cap'), (value, where) => {
        const p = base()
        if (where === 'capacity') p.capacity = value
        if (where === 'wants') p.clients[0]!.wants = value
        if (where === 'weight') p.clients[0]!.weight = value
        if (where === 'cap') p.tenants.a = { cap: value }
        expect(rejection(p).code).toBe('SLUICE_ERR_ALLOC_INVALID_NUMBER')
      }),
    )
  })
})
