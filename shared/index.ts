export type { Clock, Timer } from './clock.js'
export { ManualClock, systemClock } from './clock.js'
export type { ErrorCode, ErrorSpec } from './errors.js'
export { SluiceError, describeValue, errorCatalogue, isErrorCode } from './errors.js'
