import { beforeAll, describe, expect, it } from 'vitest'
import { quotaScenario, runQuotaScenario, type QuotaResult } from '../../bench/faults/quota.js'
import { assertBuilt } from '../helpers/replica.js'

// A quota with real processes: 3 client processes asking 300/s in all against 3,000 a 20 s
// window; in the first window the coordinator is SIGKILLed and restarted, and a client
// SIGKILLed and replaced by a new process under its id. Counted from the processes' own logs.
// Real time, about a minute (it waits for a window to open).

beforeAll(() => assertBuilt())

/**
 * Checks that a run covered `windows` windows, spent no unit of a window after it ended, and
 * never more than the budget in one; returns each window with a label for further checks.
 */
function spentWithin(
  r: QuotaResult,
  windows: number,
): { w: QuotaResult['windows'][number]; label: string }[] {
  expect(r.windows).toHaveLength(windows)
  expect(r.spilled, 'units admitted with a window’s budget after it ended').toBe(0)
  return r.windows.map((w) => {
    const label = `window ${w.index}: ${w.used} used of ${r.capacity}, ${w.asked} asked`
    expect(w.used, label).toBeLessThanOrEqual(r.capacity)
    return { w, label }
  })
}

describe('quota under faults (real processes)', () => {
  it(
    'never admits more than the budget in a window, spends nearly all of it, and opens the next full',
    { timeout: (quotaScenario.windows + 2) * quotaScenario.windowMs + 60_000 },
    async () => {
      const r = await runQuotaScenario()
      expect(r.windows).toHaveLength(quotaScenario.windows)
      for (const w of r.windows) {
        // Where the rest went: each process's unspent grant (a replacement last), and what was
        // never granted; a failure says which.
        const label = `window ${w.index} (${w.fault}): ${w.used} used of ${r.capacity}, ${w.asked} asked; unspent per process ${w.unspent.join(', ')}, never granted ${w.neverGranted}`
        expect(w.asked, label).toBeGreaterThan(1.5 * r.capacity)
        expect(w.used, label).toBeLessThanOrEqual(r.capacity)
        // Demand is twice the budget: what is not used is the SIGKILLed process's block, granted
        // and not spent (its log's last lease less what it admitted), or sent and not yet taken
        // in (never granted, by the logs). Nothing else is lost, the restart included.
        const stranded = w.unspent[1]! + w.neverGranted
        expect(w.used + stranded, label).toBeGreaterThanOrEqual(0.99 * r.capacity)
        // A block is what its process asks over the quota's horizon and its link's round trip:
        // alone 24-55 units (100/s asked, horizon 0.5 s); a process stalled 0.9 s just before
        // its kill asks its stall's backlog at once, and its block grows with it (105 measured,
        // SIGSTOP/SIGCONT). A CI run under the whole suite's load measured 2,785 used (before
        // these figures were logged, 5084ea2): the bound is 10% of the budget.
        expect(stranded, label).toBeLessThanOrEqual(0.1 * r.capacity)
      }
    },
  )

  // Every link delayed 400 ms each way: a lease comes later than windowGraceMs (200 ms here)
  // covers. A window's budget left at its edge (150/s asked against 1,000 a 5 s window) is
  // spent up to the edge and not after: the end is measured from a report, sent before the
  // coordinator handled it. Spent until a lease's life from its receipt, units of each window
  // were admitted after it ended (counted by the wall clock, tick by tick).
  const delayed = {
    ...quotaScenario,
    processes: 3,
    ratePerSec: 50,
    capacity: 1000,
    windowMs: 5000,
    windows: 3,
    // Blocks are sized for two refresh periods and the link's round trip as the coordinator
    // measures it (0.8 s here): sized for the periods alone they ran dry for half of every
    // renewal (measured 38-42% of what was asked in each window; with refreshMs 1000, 57-77%).
    refreshMs: 250,
    coordinatorKillMs: undefined,
    clientKillMs: undefined,
    delayMs: 400,
  }
  it(
    'spends no unit of a window after its end when every lease comes 400 ms late (#41)',
    { timeout: (delayed.windows + 2) * delayed.windowMs + 60_000 },
    async () => {
      const r = await runQuotaScenario(delayed)
      for (const [i, { w, label }] of spentWithin(r, delayed.windows).entries()) {
        // What a 0.8 s round trip costs: the last report's delay before each edge, the first
        // lease's after it (16% of a 5 s window). Measured 67-68% in the first window, from
        // the start; 74-80% after (38-42% before blocks lasted the round trip). Under the whole
        // suite's load on two cores a window after the first measured 63.6% once (2026-12-03;
        // 77-85% alone, six windows): the bound is set below that, well above 38-42%.
        if (i > 0) expect(w.used, label).toBeGreaterThanOrEqual(0.55 * w.asked)
      }
    },
  )

  // A slow disk: every fdatasync 300 ms longer, ledgerMaxWriteMs 100. Every batch leaves 200 ms
  // or more late: its leases' lives shortened by what is late, a window's end and a next
  // window's start and end from receipt by all it waited (server/coordinator/leaving.ts). A
  // window's budget left at its edge is still spent up to the edge and not after, and a check
  // between two windows counts in both.
  const slowDisk = {
    ...delayed,
    windows: 2,
    delayMs: undefined,
    slowDisk: { fsyncMs: 300, ledgerMaxWriteMs: 100 },
  }
  it(
    'spends no unit of a window after its end when every ledger write is late (a slow disk)',
    { timeout: (slowDisk.windows + 2) * slowDisk.windowMs + 60_000 },
    async () => {
      const r = await runQuotaScenario(slowDisk)
      expect(r.shortenedBatches, 'lease batches sent late, shortened').toBeGreaterThan(0)
      for (const { w, label } of spentWithin(r, slowDisk.windows))
        expect(w.used, label).toBeGreaterThan(0.5 * w.asked)
    },
  )
})
