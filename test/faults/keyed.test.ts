import { beforeAll, describe, expect, it } from 'vitest'
import { crowdedKeyedScenario, keyedScenario, runKeyedScenario } from '../../bench/faults/keyed.js'
import { assertBuilt } from '../helpers/replica.js'

// Keyed families with real processes: 4 client processes asking for 10,000 keys by Zipf(1.1)
// at 2,000 requests/s each, 20/s per key; one process cut for 20 s; the coordinator SIGKILLed
// and restarted. Counted from the processes' own logs. Real time, ~36 s.

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
      // The target: each of the 20 hottest keys gets 95% of min(capacity, demand) once
      // what the cut process may enforce has run out. Measured (6 runs, 17–24 s): mean
      // 0.998–1.003, the lowest key 0.986–0.993.
      expect(
        r.hotShareMean,
        'the 20 hottest keys, mean of admitted ÷ min(capacity, demand)',
      ).toBeGreaterThanOrEqual(0.95)
      expect(r.hotShareMin, 'the 20 hottest keys, the lowest').toBeGreaterThanOrEqual(0.95)
      expect(r.firstAdmitted, 'first checks of new keys admitted').toBeGreaterThan(0.99)
    },
  )

  // The same faults with 8 processes checking through `decide` (the HTTP edge's and `check`'s
  // path): the family is crowded, the coordinator's own part decides for every process and
  // holds the hot keys they ask for. After the SIGKILL, the restarted coordinator's part frees
  // what its dead predecessor held (server/pool/clients.ts `freeDeadCentral`): before, nothing
  // was admitted for 6 s after the restart (the old part's leases counted until they lapsed),
  // the hottest keys admitted 88.1% of their due over 17-24 s (the lowest 77.1%) and first
  // checks 84.8%. Measured since (3 runs): 0 keys over (the closest 0.22 inside), hot keys'
  // mean 100.0-100.1%, the lowest 99.3%, first checks 99.87-99.92%.
  it(
    'holds every key of a crowded family to its bound, decided by the coordinator, through the cut and a restart',
    { timeout: crowdedKeyedScenario.durationMs + 60_000 },
    async () => {
      const r = await runKeyedScenario(crowdedKeyedScenario)
      // The steady window opens later by a restart slower than 1 s (measured 1.5 s here).
      const steady = `from ${r.steadyFromMs} ms, the restart took ${Math.round(r.restartTookMs ?? 0)} ms`
      expect(r.keysSeen, 'keys asked for').toBeGreaterThan(5000)
      expect(r.remoteChecks, 'checks the coordinator decided').toBeGreaterThan(r.admitted)
      expect(r.keysOver, `keys over their bound (worst ${r.worstKey}: ${r.worstExcess})`).toBe(0)
      expect(r.hotShareMean, `the 20 hottest keys, mean (${steady})`).toBeGreaterThanOrEqual(0.95)
      expect(r.hotShareMin, `the 20 hottest keys, the lowest (${steady})`).toBeGreaterThanOrEqual(
        0.95,
      )
      expect(
        r.firstAdmitted,
        `first checks of new keys admitted, of ${r.firstChecks} (${steady}; left out: ${r.rampChecks}, ${(100 * r.rampAdmitted).toFixed(1)}% admitted)`,
      ).toBeGreaterThan(0.99)
    },
  )
})
