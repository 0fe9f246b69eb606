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
  round(pool, r, sharing, reserved, nowMs) {
    const wants = defaultHolders(r, sharing)
    handOverHeld(pool, r, sharing, wants, nowMs)
    maxMinTargets(r, sharing, wants, reserved, {
      wholeTokens: false,
      weights: defaultWeights(sharing),
    })
    settle(pool, r, sharing, nowMs)
  },
})
