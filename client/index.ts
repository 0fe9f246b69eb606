export { SluiceClient, createClient } from './client.js'
export type { ClientOptions, ClientTlsOptions } from './options.js'
export { KeyedFamily } from './keyed/index.js'
export type { KeyLease, KeySpent, KeyedEvents, KeyedOptions } from './keyed/index.js'
export { Resource } from './resource.js'
export type {
  AcquireOptions,
  FailureMode,
  Permit,
  ResourceMode,
  ResourceOptions,
} from './resource.js'
export { TokenBucket } from '../shared/limiters/index.js'
export type { Clock, LeaseGrant, Timer } from '../shared/index.js'
export { ManualClock, SluiceError, systemClock } from '../shared/index.js'
export type { ClientSocket, SocketFactory, SocketTls } from './socket.js'
