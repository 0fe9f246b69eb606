export { allocate, allocateNormalised, grantsById } from './allocate.js'
export { proportionalShare } from './proportional.js'
export { normaliseProblem } from './validate.js'
export type { NormalisedProblem } from './validate.js'
export { waterFill } from './water-fill.js'
export { wholeTokens, wholeUnits } from './whole-units.js'
export { algorithms, defaultAlgorithm, defaultSurplus, surplusPolicies } from './types.js'
export type {
  Algorithm,
  Allocation,
  AllocationProblem,
  ClientDemand,
  ShareRule,
  SurplusPolicy,
  TenantSpec,
} from './types.js'
export { allocationInputSchema, parseAllocationInput } from './input.js'
