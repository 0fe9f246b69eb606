export { algorithms, allocate, grantsById, surplusPolicies } from './allocation/index.js'
export type {
  Algorithm,
  Allocation,
  AllocationProblem,
  ClientDemand,
  SurplusPolicy,
  TenantSpec,
} from './allocation/index.js'
export { createCoordinator } from './create.js'
export type { CoordinatorOptions, RunningCoordinator } from './create.js'
export type { CoordinatorEvents } from './wiring/index.js'
export { loadConfigFile, parseConfig, parseConfigText } from './config/index.js'
export type { Config, ConfigInput } from './config/index.js'
