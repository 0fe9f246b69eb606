import { beforeAll, describe, expect, it } from 'vitest'
import { quotaScenario, runQuotaScenario } from '../../bench/faults/quota.js'
import { assertBuilt } from '../helpers/replica.js'

// A quota with real processes: 3 client processes asking 300/s in all against 3,000 a 20 s
// window; in the first window the coordinator is SIGKILLed and restarted, and a client
// SIGKILLed and replaced by a new process under its id. Counted from the processes' own logs.
// Real time, about a minute (it waits for a window to open).

beforeAll(() => assertBuilt())

describe('quota under faults (real processes)', () => {
  it(
    'never admits more than the budget in a window, spends nearly all of it, and opens the next full',
    { timeout: (quotaScenario.windows + 2) * quotaScenario.windowMs + 60_000 },
    async () => {
      const r = await runQuotaScenario()
      expect(r.windows).toHaveLength(quotaScenario.windows)
      for (const w of r.windows) {
        const label = `window ${w.index} (${w.fault}): ${w.used} used of ${r.capacity}, ${w.asked} asked`
        expect(w.asked, label).toBeGreaterThan(1.5 * r.capacity)
        expect(w.used, label).toBeLessThanOrEqual(r.capacity)
        // Demand is twice the budget: what is not used is a crashed client's block, and the
        // restart's outage beyond what blocks held.
        expect(w.used, label).toBeGreaterThanOrEqual(0.97 * r.capacity)
      }
    },
  )
})
