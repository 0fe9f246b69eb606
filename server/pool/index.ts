export { DemandHistory } from './demand.js'
export { Pool } from './pool.js'
export type { DemandReport, LeaseBatch, SettingsSource } from './pool.js'
export type { ClientSnapshot, ResourceSnapshot } from './snapshot.js'
