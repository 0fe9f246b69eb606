import { beforeAll, describe, expect, it } from 'vitest'
import {
  keyedQuotaResetScenario,
  runKeyedQuotaResetScenario,
} from '../../bench/faults/keyed-quota.js'
import { assertBuilt } from '../helpers/replica.js'

// Keys reset under faults, with real processes: the keyed quota scenario (3 client processes,
// 900 requests/s over 5,000 keys by Zipf(1.1), 100 a key a 20 s window) for one window. The
// three hottest keys, spent within a second or two, are reset 6 s in (POST /v1/key/reset);
// then a client process is SIGKILLed and replaced, and the coordinator SIGKILLed and
// restarted (a restart forgets a reset). Counted from the processes' own logs.

beforeAll(() => assertBuilt())

describe('key reset under faults (real processes)', () => {
  it(
    'gives each key reset its budget again, never more than one budget after the reset, and leaves the other keys their bound',
    { timeout: keyedQuotaResetScenario.windowMs + 60_000 },
    async () => {
      const r = await runKeyedQuotaResetScenario()
      const capacity = r.capacity
      expect(r.resets).toHaveLength(3)
      for (const k of r.resets) {
        const label = `${k.key}: ${k.before} before the reset, ${k.after} after`
        expect(k.status, label).toBe(202)
        // Spent before the reset (they ask 20 to 30 times their budget).
        expect(k.before, label).toBeGreaterThanOrEqual(0.9 * capacity)
        expect(k.before, label).toBeLessThanOrEqual(capacity)
        // After it: the budget again, at most one budget (and what was left, had any been).
        expect(k.after, label).toBeLessThanOrEqual(capacity + (capacity - k.before))
        // At least the budget less what the SIGKILLed process stranded: it is killed 0.3 s
        // after the reset, holding its block of each hot key (its demand over two refresh
        // periods and its link's round trip, up to 8 periods of it: larger on a loaded
        // machine), which nobody may spend until the window's end. What the coordinator counted
        // it holding unreported just after the kill (GET /v1/key) is that block. Measured, two
        // CPU hogs beside it: admitted + stranded 100 or 101 (the killed process's admissions
        // since its last report count in both), stranded 0 to 40; a CI run once admitted 33
        // after the reset, which a fixed floor of 40 took for a failure. A reset that did nothing
        // leaves 0.
        expect(
          k.after + k.strandedByKill,
          `${label}, ${k.strandedByKill} stranded by the kill; by process ${k.admittedByLog.join('/')}`,
        ).toBeGreaterThanOrEqual(0.9 * capacity)
        // Asked for, after the reset and before the restart (which forgets it), so that the budget
        // given again is spent in the run: 212 (k2) to 836 (k0) measured.
        expect(k.askedUntilKill, label).toBeGreaterThan(1.5 * capacity)
      }
      expect(r.othersOver, 'keys not reset over their budget').toBe(0)
      expect(r.windows[0]!.keys).toBeGreaterThan(1500)
    },
  )
})
