export { DemandHistory } from './demand.js'
export { edgeRenewalMs } from './edge-renewal.js'
export { Pool, clientKey } from './pool.js'
export { centralClientId } from './shapes/index.js'
export { waitRefreshes as resetWaitRefreshes } from './reset.js'
export type {
  ConnectOutcome,
  DemandReport,
  Holding,
  KeyResetOutcome,
  LeaseBatch,
  QuotaClock,
  SettingsLookup,
} from './pool.js'
export type {
  ClientSnapshot,
  KeyHolder,
  KeyLookup,
  QuotaWindowSnapshot,
  ResourceSnapshot,
} from './snapshot.js'
