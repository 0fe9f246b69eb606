import { maxMinTargets } from './max-min.js'
import { settle, type Shape } from './shape.js'

/**
 * A named rate or concurrency resource: weighted max-min over each client's
 * estimated demand (surplus spread or held, as the template says).
 */
export const plainShape: Shape = Object.freeze<Shape>({
  name: 'plain',
  familyShare: false,
  hotKey: false,
  nextBlocks: undefined,
  round(pool, r, sharing, reserved, nowMs) {
    const wants = sharing.map((e) => e.history.estimate())
    maxMinTargets(r, sharing, wants, reserved, { wholeTokens: false })
    settle(pool, r, sharing, nowMs)
  },
})
