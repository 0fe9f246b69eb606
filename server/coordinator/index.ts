export { Coordinator } from './coordinator.js'
export { CoordinatorMetrics } from './metrics.js'
export type { SessionPort } from './session.js'
