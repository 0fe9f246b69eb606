import type { Entry, ResourceState } from '../entry.js'
import { handOverHeld } from '../held-handover.js'
import { defaultHolders, defaultWeights } from './default-holders.js'
import { maxMinTargets } from './max-min.js'
import { settle, type Shape } from './shape.js'

/**
 * A rate or concurrency family's own resource (`<prefix>/*`, capacity 1: the
 * whole of every key): each default holder (defaultHolders) wants the whole,
 * so fair-share gives each its weight's share of every key.
 */
export const familyShareShape: Shape = Object.freeze<Shape>({
  name: 'family share',
  familyShare: true,
  hotKey: false,
  nextBlocks: undefined,
  round(pool, r, sharing, reserved, nowMs) {
    const wants = defaultHolders(r, sharing)
    handOverHeld(pool, r, sharing, wants, nowMs)
    maxMinTargets(r, sharing, wants, reserved, {
      wholeTokens: false,
      weights: defaultWeights(sharing),
    })
    // A process that never held a share waits for its first: the falls made for it give up what
    // fell, for it to start from (fall-gifts.ts).
    r.handOnFalls = false
    if (r.burstSlack !== undefined)
      for (const e of sharing)
        if (joins(r, e)) {
          r.handOnFalls = true
          e.joinedAtMs ??= nowMs
        }
    settle(pool, r, sharing, nowMs)
    r.handOnFalls = false
  },
})

/** Whether `e` waits for its first share, and no share released whole is handed to it instead. */
function joins(r: ResourceState, e: Entry): boolean {
  return !e.everHeld && e.handed === undefined && e.target > e.newest + r.epsilon
}
