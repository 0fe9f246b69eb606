import { loadScenarioFile, simulate, type Scenario } from '../server/sim/index.js'

/** The scenarios the safe-hold default is chosen on: Doorman's, and the partition ones. */
const files = [
  'doorman-single-server',
  'doorman-failover',
  'doorman-random-failures',
  'doorman-spike',
  'partitions',
  'partial-partition',
]

/**
 * The cost of the safe hold, measured in the simulator: for each hold (as a
 * fraction of the lease life), utilisation under excess demand over the
 * whole run and the worst excess over capacity·t + burst.
 */
export async function benchSafeHold(): Promise<string[]> {
  const holds = [0, 0.25, 0.5, 1] as const
  const rows: string[] = []
  for (const file of files) {
    const base = await loadScenarioFile(`examples/scenarios/${file}.yaml`)
    const cells: string[] = []
    for (const hold of holds) {
      const scenario: Scenario = {
        ...base,
        resources: base.resources.map((r) => ({
          ...r,
          safeHoldMs: Math.round(r.leaseTtlMs * hold),
        })),
      }
      const s = simulate(scenario).summary.resources[0]!
      const excess = s.excessOverBound > 0 ? `+${s.excessOverBound.toFixed(0)}` : '0'
      cells.push(`${(s.utilisation * 100).toFixed(1)}% / ${excess}`)
    }
    rows.push(`| ${file} | ${cells.join(' | ')} |`)
  }
  return rows
}
