import { SluiceError, describeValue, domainLimits as L } from '../../shared/index.js'
import {
  defaultAlgorithm,
  defaultSurplus,
  algorithms,
  surplusPolicies,
  type Algorithm,
  type AllocationProblem,
  type ClientDemand,
  type SurplusPolicy,
} from './types.js'

/** An allocation problem checked and laid out in typed arrays, indexed like `clients`. */
export interface NormalisedProblem {
  readonly capacity: number
  readonly algorithm: Algorithm
  readonly surplus: SurplusPolicy
  readonly ids: string[]
  readonly wants: Float64Array
  readonly weights: Float64Array
  readonly priorities: Float64Array
  /** Index into the tenant arrays; the implicit tenant is the last index. */
  readonly tenantOf: Int32Array
  readonly tenantWeights: Float64Array
  /** `Infinity` where the tenant has no cap. */
  readonly tenantCaps: Float64Array
  readonly tenantCount: number
  /** True when all clients share one priority. */
  readonly singleBand: boolean
}

function fail(
  code: 'SLUICE_ERR_ALLOC_INVALID_INPUT' | 'SLUICE_ERR_ALLOC_INVALID_NUMBER',
  detail: string,
): never {
  throw new SluiceError(code, detail)
}

function quantity(field: string, value: unknown): number {
  if (typeof value !== 'number' || !Number.isFinite(value) || value < 0 || value > L.maxQuantity) {
    fail(
      'SLUICE_ERR_ALLOC_INVALID_NUMBER',
      `${field} must be a finite number in [0, ${L.maxQuantity}], received ${describeValue(value)}`,
    )
  }
  return value
}

function weightOf(field: string, value: unknown): number {
  if (value === undefined) return 1
  if (
    typeof value !== 'number' ||
    !Number.isFinite(value) ||
    value < L.minWeight ||
    value > L.maxWeight
  ) {
    fail(
      'SLUICE_ERR_ALLOC_INVALID_NUMBER',
      `${field} must be a number in [${L.minWeight}, ${L.maxWeight}] (weights are > 0), received ${describeValue(value)}`,
    )
  }
  return value
}

function name(field: string, value: unknown): string {
  if (typeof value !== 'string' || value.length === 0 || value.length > L.maxIdLength) {
    fail(
      'SLUICE_ERR_ALLOC_INVALID_INPUT',
      `${field} must be a non-empty string of at most ${L.maxIdLength} characters, received ${describeValue(value)}`,
    )
  }
  return value
}

/**
 * Checks every field of an allocation problem and lays it out for the
 * engine. Throws a `SluiceError` naming the field, the rule and the value.
 */
export function normaliseProblem(problem: AllocationProblem): NormalisedProblem {
  if (typeof problem !== 'object' || problem === null) {
    fail(
      'SLUICE_ERR_ALLOC_INVALID_INPUT',
      `problem must be an object, received ${describeValue(problem)}`,
    )
  }
  const capacity = quantity('capacity', problem.capacity)
  const algorithm = problem.algorithm ?? defaultAlgorithm
  if (!(algorithms as readonly string[]).includes(algorithm)) {
    throw new SluiceError(
      'SLUICE_ERR_ALLOC_UNKNOWN_ALGORITHM',
      `algorithm must be one of ${algorithms.join(', ')}, received ${describeValue(algorithm)}`,
    )
  }
  const surplus = problem.surplus ?? defaultSurplus
  if (!(surplusPolicies as readonly string[]).includes(surplus)) {
    fail(
      'SLUICE_ERR_ALLOC_INVALID_INPUT',
      `surplus must be one of ${surplusPolicies.join(', ')}, received ${describeValue(surplus)}`,
    )
  }

  const tenantIndex = new Map<string, number>()
  const tenantWeightList: number[] = []
  const tenantCapList: number[] = []
  const tenants = problem.tenants ?? {}
  if (typeof tenants !== 'object' || tenants === null || Array.isArray(tenants)) {
    fail(
      'SLUICE_ERR_ALLOC_INVALID_INPUT',
      `tenants must be an object, received ${describeValue(tenants)}`,
    )
  }
  for (const [tenantName, spec] of Object.entries(tenants)) {
    name(`tenants key`, tenantName)
    if (typeof spec !== 'object' || spec === null) {
      fail(
        'SLUICE_ERR_ALLOC_INVALID_INPUT',
        `tenants.${tenantName} must be an object, received ${describeValue(spec)}`,
      )
    }
    tenantIndex.set(tenantName, tenantWeightList.length)
    tenantWeightList.push(weightOf(`tenants.${tenantName}.weight`, spec.weight))
    tenantCapList.push(
      spec.cap === undefined ? Infinity : quantity(`tenants.${tenantName}.cap`, spec.cap),
    )
  }
  // The implicit tenant of clients that name none: weight 1, no cap.
  const implicitTenant = tenantWeightList.length
  tenantWeightList.push(1)
  tenantCapList.push(Infinity)

  const clients: unknown = problem.clients
  if (!Array.isArray(clients)) {
    fail(
      'SLUICE_ERR_ALLOC_INVALID_INPUT',
      `clients must be an array, received ${describeValue(clients)}`,
    )
  }
  const n = clients.length
  const ids = new Array<string>(n)
  const wants = new Float64Array(n)
  const weights = new Float64Array(n)
  const priorities = new Float64Array(n)
  const tenantOf = new Int32Array(n)
  let singleBand = true
  for (let i = 0; i < n; i++) {
    const entry: unknown = clients[i]
    const at = `clients[${i}]`
    if (typeof entry !== 'object' || entry === null) {
      fail(
        'SLUICE_ERR_ALLOC_INVALID_INPUT',
        `${at} must be an object, received ${describeValue(entry)}`,
      )
    }
    const c = entry as ClientDemand
    const id = name(`${at}.id`, c.id)
    ids[i] = id
    wants[i] = quantity(`${at}.wants`, c.wants)
    weights[i] = weightOf(`${at}.weight`, c.weight)
    const p: unknown = c.priority ?? 0
    if (typeof p !== 'number' || !Number.isInteger(p) || Math.abs(p) > L.maxPriority) {
      fail(
        'SLUICE_ERR_ALLOC_INVALID_NUMBER',
        `${at}.priority must be an integer in [-${L.maxPriority}, ${L.maxPriority}], received ${describeValue(p)}`,
      )
    }
    priorities[i] = p
    if (i > 0 && p !== priorities[0]) singleBand = false
    if (c.tenant === undefined) tenantOf[i] = implicitTenant
    else {
      const t = tenantIndex.get(c.tenant)
      if (t === undefined) {
        throw new SluiceError(
          'SLUICE_ERR_ALLOC_UNKNOWN_TENANT',
          `${at}.tenant ${describeValue(c.tenant)} is not a key of tenants`,
        )
      }
      tenantOf[i] = t
    }
  }

  checkUnique(ids)

  return {
    capacity,
    algorithm,
    surplus,
    ids,
    wants,
    weights,
    priorities,
    tenantOf,
    tenantWeights: Float64Array.from(tenantWeightList),
    tenantCaps: Float64Array.from(tenantCapList),
    tenantCount: tenantWeightList.length,
    singleBand,
  }
}

/**
 * Rejects duplicate ids. Sorting a copy and comparing neighbours is several
 * times faster than a Set for a million fresh strings; the Set runs only to
 * name the duplicate once one is known to exist.
 */
function checkUnique(ids: readonly string[]): void {
  const sorted = ids.slice().sort()
  let duplicate = false
  for (let k = 1; k < sorted.length; k++) {
    if (sorted[k] === sorted[k - 1]) {
      duplicate = true
      break
    }
  }
  if (!duplicate) return
  const seen = new Set<string>()
  for (let i = 0; i < ids.length; i++) {
    const id = ids[i]!
    if (seen.has(id)) {
      throw new SluiceError(
        'SLUICE_ERR_ALLOC_DUPLICATE_CLIENT',
        `clients[${i}].id ${describeValue(id)} appears more than once`,
      )
    }
    seen.add(id)
  }
}
