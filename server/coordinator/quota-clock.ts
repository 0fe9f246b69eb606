import type { Clock } from '../../shared/index.js'
import { windowAt } from '../config/index.js'
import type { QuotaClock } from '../pool/index.js'

/**
 * Quota windows are wall-clock windows (a day is a day); the pool runs on the
 * monotonic clock: a window's bounds, placed on the monotonic clock now.
 */
export function wallClockWindows(clock: Clock): QuotaClock {
  return (spec, nowMs) => {
    const wallMs = nowMs - clock.now() + clock.wallNow()
    const w = windowAt(spec, wallMs)
    return {
      index: w.index,
      startMs: nowMs + (w.startMs - wallMs),
      endMs: nowMs + (w.endMs - wallMs),
    }
  }
}
