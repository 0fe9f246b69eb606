import { handOverHeld } from '../held-handover.js'
import { centralClientId, defaultHolders, defaultWeights } from './default-holders.js'
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
    // A share released with what it held goes to a process, never to the coordinator's own part.
    handOverHeld(
      pool,
      r,
      sharing,
      wants.map((w, i) => (sharing[i]!.client.clientId === centralClientId ? 0 : w)),
      nowMs,
    )
    maxMinTargets(r, sharing, wants, reserved, {
      wholeTokens: false,
      weights: defaultWeights(sharing),
    })
    settle(pool, r, sharing, nowMs)
  },
})
