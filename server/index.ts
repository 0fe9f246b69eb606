export {
  algorithms,
  allocate,
  allocationLimits,
  grantsById,
  parseScenario,
  surplusPolicies,
} from './allocation/index.js'
export type {
  Algorithm,
  Allocation,
  AllocationProblem,
  ClientDemand,
  SurplusPolicy,
  TenantSpec,
} from './allocation/index.js'
export { runCli } from './cli/main.js'
