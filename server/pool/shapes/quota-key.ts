import { namedQuotaShape } from './named-quota.js'
import type { Shape } from './shape.js'

/**
 * One hot key of a keyed quota: a named quota of its own (used plus a
 * block, within the key's budget for the window), with a hot key's life
 * (seeded from the default shares, sent back to them once cold).
 */
export const quotaKeyShape: Shape = Object.freeze<Shape>({
  ...namedQuotaShape,
  name: 'quota key',
  hotKey: true,
  // Its leases go to a keyed family's shares, which spend no next window sent ahead.
  sendsAhead: false,
})
