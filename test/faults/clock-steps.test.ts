import { existsSync } from 'node:fs'
import { beforeAll, describe, expect, it } from 'vitest'
import { libfaketime } from '../../bench/faults/harness.js'
import { keyedQuotaScenario, runKeyedQuotaScenario } from '../../bench/faults/keyed-quota.js'
import { quotaScenario, runQuotaScenario } from '../../bench/faults/quota.js'
import { clockStepVariants } from '../../bench/faults/clock-steps.js'
import { assertBuilt } from '../helpers/replica.js'

// Quota windows under a stepped wall clock (#39.2), with real processes: the coordinator's wall
// clock stepped ±30 s (libfaketime, the coordinator only), across a SIGKILL and restart or live.
// 10 s windows, three processes asking 300/s in all. Counted from the processes' own logs: per
// window as the coordinator leased it (exact: no budget twice), and per window by the processes'
// clocks (within the slew by which the coordinator's windows come back in line).
// Before: 2,240 and 2,321 of 1,500 across a restart (+30 s, −30 s), 2,294 and 2,317 with live
// steps; keyed, 11 keys at 200 of 100.

beforeAll(() => {
  assertBuilt()
  if (!existsSync(libfaketime))
    throw new Error(
      `${libfaketime} is missing: apt-get install faketime (.ci/system-deps, the first step of npm test, does)`,
    )
})

const timeoutMs = 4 * 10_000 + 60_000

describe('a named quota under a stepped wall clock (real processes)', () => {
  for (const [name, v] of Object.entries(clockStepVariants))
    it(`${name}: no window's budget is given out twice`, { timeout: timeoutMs }, async () => {
      const r = await runQuotaScenario({ ...quotaScenario, ...v, capacity: 1500 })
      expect(r.windows).toHaveLength(2)
      for (const w of r.leaseWindows)
        expect(w.used, `window ${w.index} as leased`).toBeLessThanOrEqual(r.capacity)
      // By the processes' clocks: while the coordinator's windows catch up with its wall clock
      // (a step, or a restart's downtime, slewed at 1%), up to 1% of a window's asking (300/s
      // for 10 s) falls across an edge. Measured: 1,500 across the restarts, 1,514 live.
      const slack = 0.01 * 300 * 10
      for (const w of r.windows) {
        expect(w.used, `window ${w.index}: ${w.fault}`).toBeLessThanOrEqual(r.capacity + slack)
        expect(w.used, `window ${w.index} spent its budget`).toBeGreaterThan(0.9 * r.capacity)
      }
    })
})

describe('a keyed quota under a stepped wall clock (real processes)', () => {
  for (const name of ['restart, +30 s', 'restart, −30 s'] as const)
    it(
      `${name}: no key's budget is given out twice in a window`,
      { timeout: timeoutMs },
      async () => {
        const r = await runKeyedQuotaScenario({ ...keyedQuotaScenario, ...clockStepVariants[name] })
        for (const w of r.leaseWindows)
          expect(w.keysOver, `window ${w.index} as leased (most ${w.mostUsed})`).toBe(0)
        // By the processes' clocks, the same slew as above: a key asking well past its budget
        // may see a few units of the next window's budget before the edge (measured 0 to 5 of
        // 100 over).
        for (const w of r.windows) {
          expect(w.mostUsed, `window ${w.index}: ${w.fault}`).toBeLessThanOrEqual(1.1 * r.capacity)
          expect(w.keys).toBeGreaterThan(1000)
        }
      },
    )
})
