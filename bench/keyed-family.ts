import { KeyedFamily } from '../client/keyed/index.js'
import { resolveKeyedOptions } from '../client/options.js'
import { ManualClock } from '../shared/index.js'

/**
 * A keyed rate family holding a third of every key, on a manual clock and with no coordinator:
 * what the in-process benches of a family's paths (keyed-decide.ts, keyed-remaining.ts) time.
 */
export function benchFamily(keyCapacity: number): { family: KeyedFamily; clock: ManualClock } {
  const owner = {
    requestEarlyReport: () => undefined,
    drained: () => undefined,
    askRemote: () => Promise.resolve({ admitted: false, retryAfterMs: 0 }),
  }
  const clock = new ManualClock()
  const family = new KeyedFamily('k', resolveKeyedOptions('k', {}), clock, clock, owner)
  family.applyFamilyLease({
    resource: 'k/*',
    kind: 'rate',
    capacity: 1 / 3,
    burst: 1 / 3,
    ttlMs: 1e12,
    refreshMs: 1000,
    safeCapacity: 1 / 3,
    safeHoldMs: 1000,
    family: { kind: 'rate', capacity: keyCapacity, burst: keyCapacity },
  })
  return { family, clock }
}
