import { clockStepVariants } from './clock-steps.js'
import { edgeRestartVariants } from './edge-restarts.js'
import { runFaultScenario, type FaultResult } from './harness.js'
import { runColdKeys, runOddKeys, runStaleLedger, runTenantAttack } from './hostile-keys.js'
import {
  keyedQuotaScenario,
  runKeyedQuotaResetScenario,
  runKeyedQuotaScenario,
} from './keyed-quota.js'
import { crowdedKeyedScenario, runKeyedScenario, type KeyedResult } from './keyed.js'
import { quotaScenario, runQuotaScenario } from './quota.js'
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
const chosen = faultScenarios.filter((s) => only === undefined || s.name.includes(only))
if (chosen.length > 0) console.log(faultHeader.join('\n'))
for (const scenario of chosen) {
  for (const r of await runFaultScenario(scenario)) console.log(faultRow(r))
}
if (only === undefined || 'keyed'.includes(only)) {
  // The keyed family: per key, from the processes' logs; then crowded, decided by the coordinator.
  const row = (label: string, k: KeyedResult): string =>
    `| ${label} | ${k.keysSeen} | ${k.keysOver} | ${(-k.worstExcess).toFixed(1)} | ${(k.hotShareMean * 100).toFixed(1)}% (${(k.hotShareMin * 100).toFixed(1)}%) | ${(k.firstAdmitted * 100).toFixed(2)}% of ${k.firstChecks} | ${(k.rampAdmitted * 100).toFixed(1)}% of ${k.rampChecks} |`
  const k = await runKeyedScenario()
  const c = await runKeyedScenario(crowdedKeyedScenario)
  console.log(
    [
      '',
      '| keyed family | keys seen | keys over capacity·t + burst | worst slack (tokens) | 20 hottest keys, mean (min) of admitted ÷ min(capacity, demand) | first checks admitted (after the 2 s ramp) | during the ramp |',
      '| --- | --- | --- | --- | --- | --- | --- |',
      row('4 processes, 10,000 keys, Zipf(1.1), 20/s a key; one cut 20 s; SIGKILL and restart', k),
      row(
        `8 processes checking through \`decide\` (crowded: the coordinator decides), the same; remote answers' slowest ${c.remoteLatencyMaxMs.toFixed(0)} ms`,
        c,
      ),
    ].join('\n'),
  )
}
if (only === undefined || 'quota'.includes(only)) {
  // The quota: per window, from the processes' logs.
  const q = await runQuotaScenario()
  console.log(
    [
      '',
      '| quota: 3 processes asking 300/s of 3,000 a 20 s window | used | asked | used ÷ budget | bound |',
      '| --- | --- | --- | --- | --- |',
      ...q.windows.map(
        (w) =>
          `| window ${w.index}: ${w.fault} | ${w.used} | ${w.asked} | ${((w.used / q.capacity) * 100).toFixed(1)}% | ${w.used <= q.capacity ? 'held' : 'EXCEEDED'} |`,
      ),
    ].join('\n'),
  )
}
if (only === undefined || 'keyed-quota'.includes(only)) {
  // The keyed quota: per key and window, from the processes' logs.
  const q = await runKeyedQuotaScenario()
  console.log(
    [
      '',
      '| keyed quota: 3 processes, 900/s over 5,000 keys by Zipf(1.1), 100 a key a 20 s window | keys asked | keys over budget | most used of a key | 10 hottest keys, least used ÷ budget | first checks admitted (edges apart) | at the window edges |',
      '| --- | --- | --- | --- | --- | --- | --- |',
      ...q.windows.map(
        (w) =>
          `| window ${w.index}: ${w.fault} | ${w.keys} | ${w.keysOver} | ${w.mostUsed} of ${q.capacity} | ${(w.hotUsedMin * 100).toFixed(0)}% | ${(w.firstAdmitted * 100).toFixed(2)}% of ${w.firstChecks} | ${(w.edgeAdmitted * 100).toFixed(1)}% of ${w.edgeChecks} |`,
      ),
    ].join('\n'),
  )
}
if (only === undefined || 'key-reset'.includes(only)) {
  // Keys reset under faults (#42): what each key admitted before and after its reset.
  const r = await runKeyedQuotaResetScenario()
  console.log(
    [
      '',
      `| key reset: ${r.windows[0]?.fault ?? ''} | admitted before the reset | after it | stranded by the kill | answer |`,
      '| --- | --- | --- | --- | --- |',
      ...r.resets.map(
        (k) =>
          `| ${k.key} | ${k.before} of ${r.capacity} | ${k.after} (${k.admittedByLog.join('/')}) | ${k.strandedByKill} | ${k.status} |`,
      ),
      `| keys not reset over their budget | ${r.othersOver} | | | |`,
    ].join('\n'),
  )
}
if (only === undefined || 'hostile'.includes(only)) {
  // Keyed families under hostile callers and tenants (#39): the honest side against a control run.
  const odd = await runOddKeys()
  console.log(
    [
      '',
      '| odd keys at a gateway (C1 control character, 1,100 and 1,000 characters, `*`) | odd-key requests answered 400 | honest requests answered 200 | gateway disconnects |',
      '| --- | --- | --- | --- |',
      `| 876 odd-key requests 4 s in, 3 honest keys at 5/s for 14 s | ${odd.oddRefused} of ${odd.oddSent} | ${odd.honestOk} of ${odd.honestSent} | ${odd.disconnects.length} |`,
    ].join('\n'),
  )
  const rows = []
  for (const attack of [
    'none',
    'long-hot-keys',
    'hot-slots',
    'default-places',
    'inflated-used',
  ] as const) {
    const r = await runTenantAttack(attack)
    rows.push(
      `| ${attack} | ${r.hotPerSec.toFixed(1)} | ${(r.firstAdmitted * 100).toFixed(1)}% of ${r.firstChecks} | ${r.plainPerSec.toFixed(1)} | ${r.quotaPerSec.toFixed(1)} | ${r.disconnects} |`,
    )
  }
  console.log(
    [
      '',
      "| tenant A's attack (tenant B: 2 processes) | B's busy key, admitted/s | B's first checks of new keys | B's plain resource, /s | B's share of a quota, /s | B's disconnects |",
      '| --- | --- | --- | --- | --- | --- |',
      ...rows,
    ].join('\n'),
  )
  const cold = await runColdKeys()
  const stale = await runStaleLedger()
  console.log(
    [
      '',
      '| operations | measured |',
      '| --- | --- |',
      `| a new key a second, each asked for 3 s, for ${cold.asked} s | at most ${cold.most} hot keys at once (${cold.last} at the end) |`,
      `| ledger put back from a copy 7 s older, then a new process | noticed: ${stale.noticed}; used ${stale.used} of ${stale.capacity} |`,
    ].join('\n'),
  )
}
if (only === undefined || 'clock'.includes(only)) {
  // Quota windows under a stepped wall clock (#39.2).
  const rows = []
  for (const [name, v] of Object.entries(clockStepVariants)) {
    const q = await runQuotaScenario({
      ...quotaScenario,
      ...v,
      capacity: 1500,
      killOnceAhead: true,
    })
    const k = await runKeyedQuotaScenario({ ...keyedQuotaScenario, ...v })
    rows.push(
      `| ${name} | ${q.windows.map((w) => w.used).join(', ')} | ${q.leaseWindows.map((w) => w.used).join(', ')} | ${k.windows.map((w) => w.keysOver).join(', ')} (most ${Math.max(...k.windows.map((w) => w.mostUsed))}) |`,
    )
  }
  console.log(
    [
      '',
      '| coordinator wall clock | named quota, used of 1,500 per window (processes’ clocks) | the same, per window as leased | keyed quota, keys over 100 per window |',
      '| --- | --- | --- | --- |',
      ...rows,
    ].join('\n'),
  )
}
if (only === undefined || 'window-edge'.includes(only)) {
  // A named quota's coordinator SIGKILLed in a window's last 100 ms (blocks of the next sent ahead).
  const rows = []
  for (const [name, v] of Object.entries(edgeRestartVariants)) {
    const q = await runQuotaScenario({ ...quotaScenario, ...v, capacity: 1500 })
    rows.push(
      `| ${name} | ${q.windows.map((w) => w.used).join(', ')} | ${q.leaseWindows.map((w) => `${w.used} (${w.index})`).join(', ')} | ${q.spilled} |`,
    )
  }
  console.log(
    [
      '',
      '| coordinator SIGKILLed 50 ms before an edge, back 300 ms later | named quota, used of 1,500 per window (processes’ clocks) | the same, per window as leased | spent after its window ended |',
      '| --- | --- | --- | --- |',
      ...rows,
    ].join('\n'),
  )
  const keyedRows = []
  for (const name of ['from its ledger', 'its ledger damaged (half)'] as const) {
    const k = await runKeyedQuotaScenario({ ...keyedQuotaScenario, ...edgeRestartVariants[name] })
    keyedRows.push(
      `| ${name} | ${k.windows.map((w) => w.keysOver).join(', ')} (most ${Math.max(...k.windows.map((w) => w.mostUsed))}) | ${k.windows.map((w) => `${(w.hotUsedMin * 100).toFixed(0)}%`).join(', ')} | ${k.windows.map((w) => `${(w.firstAdmitted * 100).toFixed(1)}%`).join(', ')} |`,
    )
  }
  console.log(
    [
      '',
      '| the same, a keyed quota (100 a key a 10 s window) | keys over, per window | the 10 hottest keys, least used ÷ budget | first checks admitted |',
      '| --- | --- | --- | --- |',
      ...keyedRows,
    ].join('\n'),
  )
}
process.exit(0)
