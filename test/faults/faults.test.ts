import { beforeAll, describe, expect, it } from 'vitest'
import { runFaultScenario } from '../../bench/faults/harness.js'
import { faultScenarios } from '../../bench/faults/scenarios.js'
import { assertBuilt } from '../helpers/replica.js'

// The fault suite's short form: real coordinator and client processes, each client behind its
// own TCP proxy that cuts, stalls or restores its link; SIGKILL and restart of the coordinator.
// What the clients logged is merged and held to the bound. Real time; each scenario ~15 s.
// The long form is `npm run faults`, its table in docs/operations.md.

beforeAll(() => assertBuilt())

describe('fault suite (real processes)', () => {
  for (const scenario of faultScenarios.filter((s) => s.ci === true)) {
    it(
      `${scenario.name}: ${scenario.description}`,
      { timeout: scenario.durationMs + 60_000 },
      async () => {
        const results = await runFaultScenario(scenario)
        for (const r of results) {
          if (r.kind === 'rate') {
            expect(r.excess, `${r.resource}: tokens beyond capacity·t + burst`).toBeLessThanOrEqual(
              0,
            )
            // Something was admitted: a run that admits nothing would pass the bound vacuously.
            expect(r.utilisation, `${r.resource}: utilisation`).toBeGreaterThan(
              scenario.minUtilisation ?? 0.5,
            )
          } else {
            expect(r.inFlightMax, `${r.resource}: slots in flight`).toBeLessThanOrEqual(r.capacity)
            expect(r.inFlightMax, `${r.resource}: slots in flight`).toBeGreaterThan(r.capacity / 2)
          }
          // A slow disk's scenario is about batches sent late: some were (the coordinator's log).
          if (scenario.slowDisk !== undefined)
            expect(r.shortenedBatches, 'lease batches sent shortened').toBeGreaterThan(0)
          if (scenario.maxLeases !== undefined)
            expect(r.leases, `${r.resource}: leases sent`).toBeLessThan(scenario.maxLeases)
        }
      },
    )
  }
})
