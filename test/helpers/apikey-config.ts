import type { ConfigInput } from '../../server/config/index.js'

/** The refresh period of `apikeyConfig`'s family, ms. */
export const apikeyRefreshMs = 100

/**
 * A coordinator's config of one keyed rate family, `apikey/*`: 10/s (burst 10) per key across
 * every process, leases of 1 s renewed every `apikeyRefreshMs`, no learning; `extra` is merged
 * into the family's template (e.g. `maxDefaultHolders`).
 */
export function apikeyConfig(extra: Record<string, unknown> = {}): ConfigInput {
  return {
    server: { limits: { roundDebounceMs: 0 } },
    resources: [
      {
        match: 'apikey/*',
        keyed: true,
        kind: 'rate',
        capacity: 10,
        leaseTtlMs: 1000,
        refreshMs: apikeyRefreshMs,
        graceMs: 200,
        learningMs: 0,
        unsafeLearning: true,
        ...extra,
      },
    ],
  }
}
