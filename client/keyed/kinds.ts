import type { ResourceKind } from '../../shared/index.js'
import type { KeyKind } from './key-kind.js'
import type { KeyLease } from './types.js'
import { quotaKeys } from './quota-keys.js'
import { rateKeys } from './rate-keys.js'
import { slotKeys } from './slot-keys.js'

/** How a key of each kind is enforced here: a row per kind, as `kindTraits` has. */
export const keyKinds: Readonly<Record<ResourceKind, KeyKind>> = Object.freeze({
  rate: rateKeys,
  concurrency: slotKeys,
  quota: quotaKeys,
})

const nothing: KeyLease = Object.freeze({ capacity: 0, burst: 0, source: 'none' as const })

/**
 * How a key is enforced once its family closed: nothing is admitted and nothing held. Its
 * share went back with the release, maybe to another process with what it held
 * (server/pool/held-handover.ts), so a check after `close()` must not take a token the heir
 * now holds. Set once, at close: the hot path keeps its one call through the kind.
 */
export function closedKeys(kind: KeyKind): KeyKind {
  return Object.freeze<KeyKind>({
    ...kind,
    take: () => false,
    remaining: () => 0,
    untracked: () => 0,
    leaseOf: () => nothing,
  })
}
