export { RateLimitCore, derivePolicy, policyFits } from './core.js'
export type { Decision, RateLimitInfo } from './core.js'
export { fastifyRateLimit } from './fastify.js'
export { limitHeaders, policyHeader, rateLimitHeader, retryAfterSeconds } from './headers.js'
export type { LimitState, RateLimitPolicy } from './headers.js'
export { ipKey } from './keys.js'
export { createRateLimitMiddleware, rateLimitOf } from './middleware.js'
export type { Middleware } from './middleware.js'
export { checkRateLimitOptions } from './options.js'
export type {
  FrameworkRequest,
  HeaderSet,
  KeySource,
  LimitContext,
  RateLimitOptions,
  RequestInfo,
} from './options.js'
