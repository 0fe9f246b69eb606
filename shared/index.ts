export { bearerHeader, bearerToken } from './bearer.js'
export { seededRandom, zipf } from './random.js'
export { backoffCapFor, backoffDelayMs, connectTimeoutFor } from './backoff.js'
export { durationOption, parseDuration } from './limiters/index.js'
export type { Clock, Timer } from './clock.js'
export { ManualClock, nextTurn, systemClock } from './clock.js'
export { CoarseClock, preciseNow, sharedCoarseClock } from './coarse-clock.js'
export type { ErrorCode, ErrorSpec } from './errors.js'
export {
  SluiceError,
  closeCodeOf,
  codeOfClose,
  describeValue,
  errorCatalogue,
  errorCodes,
  formatError,
  internalCloseCode,
  isErrorCode,
} from './errors.js'
export {
  clampQuantity,
  clampWeight,
  clockDriftShare,
  commitmentLifeMs,
  defaultBurst,
  defaultLearningMs,
  demandEstimators,
  domainLimits,
  failureModes,
  inKindUnits,
  kindTraits,
  resourceKinds,
  safeHoldMsOf,
  wholeSlots,
} from './domain.js'
export type { DemandEstimator, FailureMode, KindTraits, ResourceKind } from './domain.js'
export { familyIdOf, keyIdOf, keyOfId, keyProblem, maxKeyLength } from './keys.js'
export {
  crowdedShare,
  fallbackBurst,
  fastestRefillMs,
  keyLimits,
  quotaHorizonMs,
  safeFallback,
  shareOfKey,
  slowestRefillMs,
} from './lease-math.js'
export { describeIssue, describeIssues, schemaKeys, suggestKey } from './issues.js'
export type { IssueContext } from './issues.js'
export * from './protocol/index.js'
export { libraryVersion } from './version.js'
