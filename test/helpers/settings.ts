import type { ResourceSettings } from '../../server/config/index.js'

/** Resource settings for pool tests, with short periods. */
export function resourceSettings(overrides: Partial<ResourceSettings> = {}): ResourceSettings {
  return Object.freeze({
    id: 'r',
    kind: 'rate',
    capacity: 100,
    burst: 100,
    algorithm: 'fair-share',
    surplus: 'hold',
    leaseTtlMs: 1000,
    refreshMs: 250,
    graceMs: 200,
    learningMs: 0,
    safeCapacity: undefined,
    safeHoldMs: 500,
    estimator: 'max',
    window: 1,
    tenants: {},
    failureMode: 'safe',
    ...overrides,
  })
}

/** A quota `q` of 1,000 a fixed window of `windowMs`, refresh periods of 1 s, no safe hold. */
export function quotaSettings(windowMs = 60_000): ResourceSettings {
  return resourceSettings({
    id: 'q',
    kind: 'quota',
    capacity: 1000,
    burst: 1000,
    refreshMs: 1000,
    leaseTtlMs: 5000,
    safeCapacity: 0,
    safeHoldMs: 0,
    quotaWindow: { kind: 'fixed', ms: windowMs },
  })
}
