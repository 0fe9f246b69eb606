import type { ResourceKind } from '../../shared/index.js'
import type { KeyKind } from './key-kind.js'
import { quotaKeys } from './quota-keys.js'
import { rateKeys } from './rate-keys.js'
import { slotKeys } from './slot-keys.js'

/** How a key of each kind is enforced here: a row per kind, as `kindTraits` has. */
export const keyKinds: Readonly<Record<ResourceKind, KeyKind>> = Object.freeze({
  rate: rateKeys,
  concurrency: slotKeys,
  quota: quotaKeys,
})
