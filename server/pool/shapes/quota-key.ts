import { demandOf } from '../hot-keys.js'
import { namedQuotaShape, quotaBlocks } from './named-quota.js'
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
  // Its holders' blocks of the next window go ahead as a named quota's do (#41: a hot key's
  // next lease came with the round at the edge, and its checks between were refused), to those
  // that ask for it: a key nobody asks for gets none, and goes back to the default split.
  nextBlocks(r, entries, next, left, nowMs) {
    const asking = entries.filter((e) => demandOf(e, nowMs) > 0)
    const blocks = new Float64Array(entries.length)
    if (asking.length === 0) return blocks
    const sized = quotaBlocks(r, asking, next, left, next.startMs, false)
    for (let i = 0, j = 0; i < entries.length; i++)
      if (asking[j] === entries[i]) blocks[i] = sized[j++]!
    return blocks
  },
})
