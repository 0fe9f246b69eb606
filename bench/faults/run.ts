import { runFaultScenario, type FaultResult } from './harness.js'
import { faultScenarios } from './scenarios.js'

/** One markdown row of a result. */
export function faultRow(r: FaultResult): string {
  const bound =
    r.kind === 'rate'
      ? `${r.worst1s.toFixed(3)} | ${r.excess > 0 ? `+${r.excess.toFixed(0)}` : '0'} (slack ${(-r.excess).toFixed(0)}) | —`
      : `— | — | ${r.inFlightMax} of ${r.capacity}`
  const exceeded = r.kind === 'rate' ? r.excess > 0 : r.inFlightMax > r.capacity
  const verdict = !exceeded ? 'held' : r.ok ? 'exceeded (optimistic may)' : 'EXCEEDED'
  return `| ${r.scenario} | ${r.resource} (${r.kind}) | ${r.failureModes} | ${r.bound} | ${bound} | ${(r.utilisation * 100).toFixed(1)}% | ${verdict} |`
}

export const faultHeader = [
  '| scenario | resource | failure mode | bound | worst 1 s window ÷ capacity | tokens beyond capacity·t + burst | in flight max | utilisation after learning | bound |',
  '| --- | --- | --- | --- | --- | --- | --- | --- | --- |',
]

// `npm run faults [-- NAME_SUBSTRING]`: every scenario (or those matching), one row per resource.
const only = process.argv[2]
console.log(faultHeader.join('\n'))
for (const scenario of faultScenarios) {
  if (only !== undefined && !scenario.name.includes(only)) continue
  for (const r of await runFaultScenario(scenario)) console.log(faultRow(r))
}
process.exit(0)
