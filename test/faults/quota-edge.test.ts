import { beforeAll, describe, expect, it } from 'vitest'
import { edgeRestartVariants } from '../../bench/faults/edge-restarts.js'
import { quotaScenario, runQuotaScenario } from '../../bench/faults/quota.js'
import { assertBuilt } from '../helpers/replica.js'

// A named quota's coordinator SIGKILLed 50 ms before a window's edge, once the processes hold
// the next window's blocks sent ahead (and the ledger keeps them), restarted 300 ms after: from
// its ledger, from a damaged ledger, with its wall clock stepped back 30 s. Real processes, three
// asking 300/s in all against 1,500 a 10 s window (the budget spent about 5 s in); counted from
// their logs, per window as leased and by their clocks. About 30 s each.

beforeAll(() => assertBuilt())

const timeoutMs = 4 * 10_000 + 60_000

describe('a named quota whose coordinator dies in a window’s last 100 ms (real processes)', () => {
  for (const [name, v] of Object.entries(edgeRestartVariants))
    it(`${name}: no window's budget is given out twice`, { timeout: timeoutMs }, async () => {
      const r = await runQuotaScenario({ ...quotaScenario, ...v, capacity: 1500 })
      expect(r.windows).toHaveLength(2)
      // The blocks of the second window were sent before the kill: the processes spend them.
      expect(r.leaseWindows.map((w) => w.index)).toContain(r.windows[1]!.index)
      for (const w of r.leaseWindows)
        expect(w.used, `window ${w.index} as leased`).toBeLessThanOrEqual(r.capacity)
      const stepped = 'restartWallOffsetSec' in v
      // By the processes' clocks: exact, but for a stepped clock's slew (1% of a window's
      // asking, 300/s for 10 s, as in clock-steps.test.ts).
      const slack = stepped ? 0.01 * 300 * 10 : 0
      for (const w of r.windows)
        expect(w.used, `window ${w.index}: ${w.fault}`).toBeLessThanOrEqual(r.capacity + slack)
      if (!stepped) expect(r.spilled, 'units admitted after their window ended').toBe(0)
      // The first window was spent before the kill; the second, from the ledger, is spent
      // too. From a damaged ledger the coordinator learns for a whole window and gives out
      // nothing new: only the blocks sent ahead are spent (a few units, but some).
      expect(r.windows[0]!.used).toBeGreaterThan(0.97 * r.capacity)
      if (!('ledgerDamage' in v)) expect(r.windows[1]!.used).toBeGreaterThan(0.97 * r.capacity)
    })
})
