import { beforeAll, describe, expect, it } from 'vitest'
import { keyedQuotaScenario, runKeyedQuotaScenario } from '../../bench/faults/keyed-quota.js'
import { assertBuilt } from '../helpers/replica.js'

// A keyed quota with real processes: 3 client processes asking 300 requests/s each over 5,000
// keys by Zipf(1.1), against 100 a key a 20 s window; in the first window the coordinator is
// SIGKILLed and restarted, and a client SIGKILLed while it is down and replaced by a new
// process under its id (what it spent is then known only to the ledger).
// Counted from the processes' own logs, key by key and window by window. Real time, about a
// minute (it waits for a window to open).

beforeAll(() => assertBuilt())

describe('keyed quota under faults (real processes)', () => {
  it(
    'never admits more of a key than its budget in a window, gives the hottest keys their budget, and decides first checks at once',
    { timeout: (keyedQuotaScenario.windows + 2) * keyedQuotaScenario.windowMs + 60_000 },
    async () => {
      const r = await runKeyedQuotaScenario()
      expect(r.windows).toHaveLength(keyedQuotaScenario.windows)
      for (const [i, w] of r.windows.entries()) {
        const label = `window ${w.index} (${w.fault})`
        expect(w.keys, `${label}: keys asked for`).toBeGreaterThan(1500)
        expect(
          w.keysOver,
          `${label}: keys over budget (most: ${w.mostUsedKey}, ${w.mostUsed})`,
        ).toBe(0)
        expect(w.mostUsed, label).toBeLessThanOrEqual(r.capacity)
        // The hottest keys ask 20 to 30 times their budget. In the faulted window the killed
        // process's block of a hot key is stranded to the window's end: a block is two refresh
        // periods of its asking, a third of a key's 20-30 times its budget a window, so up to
        // about a quarter of the budget (measured 0.77-0.92; 0.55 once in CI, 0.44 once in 8
        // runs on a 2-core machine on 2026-12-02, the other 7 passing at 0.7: the slowest key
        // of the hottest is where a stranded block and the restart's learning meet; not a
        // bound). 1.00 in the next. Held at 0.4: a collapse, not the tail, is what it catches.
        expect(w.hotUsedMin, `${label}: hottest keys, least used ÷ budget`).toBeGreaterThan(
          i === 0 ? 0.4 : 0.9,
        )
        // Measured 0.998–1.000 (the new process under the killed one's id included).
        expect(w.firstAdmitted, `${label}: first checks admitted`).toBeGreaterThan(0.98)
      }
    },
  )
})
