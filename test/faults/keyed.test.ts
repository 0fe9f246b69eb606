import { beforeAll, describe, expect, it } from 'vitest'
import { keyedScenario, runKeyedScenario } from '../../bench/faults/keyed.js'
import { assertBuilt } from '../helpers/replica.js'

// Keyed families with real processes: 4 client processes asking for 10,000 keys by Zipf(1.1)
// at 2,000 requests/s each, 20/s per key; one process cut for 15 s; the coordinator SIGKILLed
// and restarted. Counted from the processes' own logs. Real time, ~30 s.

beforeAll(() => assertBuilt())

describe('keyed family under faults (real processes)', () => {
  it(
    'holds every key to capacity·t + burst, gives the hottest keys their due, and decides first checks at once',
    { timeout: keyedScenario.durationMs + 60_000 },
    async () => {
      const r = await runKeyedScenario()
      expect(r.keysSeen, 'keys asked for').toBeGreaterThan(5000)
      expect(r.keysOver, `keys over their bound (worst ${r.worstKey}: ${r.worstExcess})`).toBe(0)
      expect(r.worstExcess).toBeLessThanOrEqual(0)
      expect(
        r.hotShareMean,
        'the 20 hottest keys, mean of admitted ÷ min(capacity, demand)',
        // Measured 0.98–1.00 alone, 0.949 on a loaded 2-core CI run (both projects at once):
        // the floor is for hot keys left without a lease of their own, not for load.
      ).toBeGreaterThan(0.9)
      expect(r.hotShareMin, 'the 20 hottest keys, the lowest').toBeGreaterThan(0.8)
      expect(r.firstAdmitted, 'first checks of new keys admitted').toBeGreaterThan(0.99)
    },
  )
})
