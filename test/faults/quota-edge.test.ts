import { beforeAll, describe, expect, it } from 'vitest'
import { edgeRestartVariants } from '../../bench/faults/edge-restarts.js'
import { keyedQuotaScenario, runKeyedQuotaScenario } from '../../bench/faults/keyed-quota.js'
import { quotaScenario, runQuotaScenario } from '../../bench/faults/quota.js'
import { assertBuilt } from '../helpers/replica.js'

// A named quota's coordinator SIGKILLed 50 ms before a window's edge (or later, 5 ms before it at
// the latest, once the ledger keeps every process's block of the next window sent ahead), restarted 300 ms after: from
// its ledger and from a damaged ledger (with its wall clock stepped back 30 s: `npm run faults --
// window-edge`). Real processes, three
// asking 300/s in all against 1,500 a 10 s window (the budget spent about 5 s in); counted from
// their logs, per window as leased and by their clocks. About 30 s each.

beforeAll(() => assertBuilt())

const timeoutMs = 4 * 10_000 + 60_000

describe('a named quota whose coordinator dies in a window’s last 100 ms (real processes)', () => {
  // The wall clock stepped at that restart is in `npm run faults -- window-edge` only (1,500 and
  // 1,500, never over): clock-steps.test.ts steps it at a restart mid-window, and CI's time is
  // kept for the cases below.
  for (const name of ['from its ledger', 'its ledger damaged (half)'] as const)
    it(`${name}: no window's budget is given out twice`, { timeout: timeoutMs }, async () => {
      const v = edgeRestartVariants[name]
      const r = await runQuotaScenario({
        ...quotaScenario,
        ...v,
        capacity: 1500,
        killOnceAhead: true,
      })
      expect(r.windows).toHaveLength(2)
      // The kill waits for them (5 ms before the edge at the latest): CI once killed it 50 ms
      // before the edge with none sent yet, and nothing of the second window was spent. All
      // three in CI's runs since a late ack renews (edge-renewal.ts renewLate); on a loaded
      // machine (this suite beside another) 1 of 3 once: asked here is that the scenario
      // happened (a block out at the kill), not how many made it.
      expect(
        r.aheadAtKill,
        'blocks of the next window the ledger held at the kill',
      ).toBeGreaterThanOrEqual(1)
      // The blocks of the second window were sent before the kill: the processes spend them.
      expect(r.leaseWindows.map((w) => w.index)).toContain(r.windows[1]!.index)
      for (const w of r.leaseWindows)
        expect(w.used, `window ${w.index} as leased`).toBeLessThanOrEqual(r.capacity)
      // By the processes' clocks too, exact.
      for (const w of r.windows)
        expect(w.used, `window ${w.index}: ${w.fault}`).toBeLessThanOrEqual(r.capacity)
      expect(r.spilled, 'units admitted after their window ended').toBe(0)
      // The first window was spent before the kill; the second, from the ledger, is spent
      // too. From a damaged ledger the coordinator learns for a whole window and gives out
      // nothing new: only the blocks sent ahead are spent (a few units, but some).
      expect(r.windows[0]!.used).toBeGreaterThan(0.97 * r.capacity)
      if (name === 'from its ledger') expect(r.windows[1]!.used).toBeGreaterThan(0.97 * r.capacity)
    })
})

// The same kill for a keyed quota (its shares and key budgets are not sent ahead: the next
// window's come with the round at the edge, from the restarted coordinator): 3 processes asking
// 900/s in all over 5,000 keys by Zipf(1.1), 100 a key a 10 s window. Counted per key and window.
describe('a keyed quota whose coordinator dies in a window’s last 100 ms (real processes)', () => {
  // From its ledger: the case that found a restarted coordinator learning (263e3b6). A damaged
  // ledger is in `npm run faults -- window-edge`'s figures, not here (it learns either way).
  for (const name of ['from its ledger'] as const)
    it(`${name}: no key's budget is given out twice`, { timeout: timeoutMs }, async () => {
      const r = await runKeyedQuotaScenario({ ...keyedQuotaScenario, ...edgeRestartVariants[name] })
      expect(r.windows).toHaveLength(2)
      for (const w of r.leaseWindows)
        expect(w.keysOver, `window ${w.index} as leased (most ${w.mostUsed})`).toBe(0)
      for (const w of r.windows) {
        expect(w.keysOver, `window ${w.index}: ${w.fault} (most ${w.mostUsed})`).toBe(0)
        expect(w.keys).toBeGreaterThan(1000)
      }
      // The hottest keys spend their budget in the first window, and from the ledger in the
      // second too, less the time the processes took to come back (about 2 s of the 10 s:
      // their reconnect's backoff and the coordinator's start; their shares ended at the edge).
      // Measured 0.85. Before the processes stopped claiming in their hello the budgets of the
      // window that had ended, the restarted coordinator took those claims for leases its
      // ledger did not know and learned for a whole window: 0.05 and 0.12. From a damaged
      // ledger it learns for a window anyway (nothing new given out).
      expect(r.windows[0]!.hotUsedMin).toBeGreaterThan(0.9)
      expect(r.windows[1]!.hotUsedMin).toBeGreaterThan(0.5)
    })
})
