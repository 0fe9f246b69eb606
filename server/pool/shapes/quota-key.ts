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
  // A key's next window is its family's default share sent ahead (keyed-quota-share.ts): a
  // key leased on its own waits for its lease of that window (client/keyed/quota-keys.ts).
  nextBlocks: undefined,
})
