import type { Entry } from '../entry.js'
import { demandOf } from '../hot-keys.js'
import { maxMinTargets } from './max-min.js'
import { settle, type Shape } from './shape.js'

/**
 * One hot key of a rate or concurrency family: shared among the holders
 * that ask for it now. A holder that does not (it never did, or stopped:
 * not reported lately) gets nothing of it, surplus spread or not, so what
 * it was seeded with goes back and a key nobody asks for goes cold
 * (hot-keys.ts); a share below one token of burst goes whole to a few
 * (`wholeTokens`).
 */
export const hotKeyShape: Shape = Object.freeze<Shape>({
  name: 'hot key',
  familyShare: false,
  hotKey: true,
  round(pool, r, sharing, reserved, nowMs) {
    const active: Entry[] = []
    const wants: number[] = []
    for (const e of sharing) {
      const d = demandOf(e, nowMs)
      if (d > 0) {
        active.push(e)
        wants.push(d)
      } else e.target = 0
    }
    maxMinTargets(r, active, wants, reserved, { wholeTokens: true })
    settle(pool, r, sharing, nowMs)
  },
})
