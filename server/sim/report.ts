import type { SimResult } from './run.js'

const csvColumns = [
  'tSec',
  'resource',
  'capacity',
  'demand',
  'admittedRate',
  'enforced',
  'committed',
  'jain',
  'maxDeviation',
  'clients',
] as const

/** The time series: one row per resource per sample. */
export function toCsv(result: SimResult): string {
  const lines = [csvColumns.join(',')]
  for (const row of result.rows) {
    lines.push(
      csvColumns
        .map((c) => {
          const v = row[c]
          return typeof v === 'number' ? String(Math.round(v * 1e4) / 1e4) : v
        })
        .join(','),
    )
  }
  return lines.join('\n') + '\n'
}

const pct = (x: number): string => `${(x * 100).toFixed(2)}%`

/** The summary as a readable table. */
export function toTable(result: SimResult): string {
  const s = result.summary
  const out: string[] = [
    `scenario ${s.name}: ${s.clients} clients, ${s.simulatedSec} s simulated in ${(s.wallMs / 1000).toFixed(1)} s; ${s.messages} messages (${s.lost} packet losses resent), ${s.crashes} coordinator crash(es)`,
  ]
  for (const r of s.resources) {
    if (r.quota !== undefined) {
      // A quota: its windows, not rates.
      out.push(`  ${r.resource} (quota)`)
      for (const w of r.quota.windows)
        out.push(
          `    window ${w.index}${w.whole ? '' : ' (not whole: the run or its first learning cuts it)'}   used ${w.used} of ${w.capacity} (${pct(w.capacity > 0 ? w.used / w.capacity : 0)}), asked ${w.asked}`,
        )
      out.push(
        `    stranded at a window's end        ${pct(r.quota.worstStranded)} of the budget at worst (windows whose demand exceeded it)`,
      )
      continue
    }
    const conv = r.convergence.filter((c) => c.refreshes !== undefined && !c.disturbed)
    const worst = conv.length === 0 ? undefined : Math.max(...conv.map((c) => c.refreshes!))
    const never = r.convergence.filter((c) => c.refreshes === undefined && !c.disturbed).length
    out.push(
      `  ${r.resource}`,
      `    utilisation under excess demand   ${pct(r.utilisation)} (outside failovers ${pct(r.utilisationSteady)})`,
      `    worst 1 s admitted ÷ capacity     ${pct(r.worst1s)} (outside failovers ${pct(r.worst1sSteady)})`,
      `    over capacity·t + Σburst          ${r.excessOverBound.toFixed(1)} tokens at worst (outside failovers ${r.excessOverBoundSteady.toFixed(1)}; ≤ 0 means held)`,
      `    1 s samples above capacity        ${r.overCapacityEpisodes} episode(s), peak ${pct(r.overCapacityPeak)}`,
      `    Jain index against the ideal      mean ${r.jainMean.toFixed(4)}, min ${r.jainMin.toFixed(4)}`,
      `    convergence after ${conv.length + never} event(s) outside failovers   worst ${worst === undefined ? '—' : `${worst.toFixed(2)} refresh periods`}${never > 0 ? `; ${never} not converged before the next event` : ''}`,
    )
  }
  for (const r of s.resources) {
    if (r.catchUpSec.length === 0) continue
    const worst = Math.max(...r.catchUpSec)
    out.push(
      `  ${r.resource}: back to full use after each of ${r.catchUpSec.length} crash(es) within ${Number.isFinite(worst) ? `${worst.toFixed(0)} s` : 'never'} at worst`,
    )
    const released = r.releasedSec.filter((x): x is number => x !== undefined)
    if (released.length > 0)
      out.push(
        `  ${r.resource}: every client leased by the new coordinator ${Math.min(...released).toFixed(1)}–${Math.max(...released).toFixed(1)} s after a crash${released.length < r.releasedSec.length ? ` (${r.releasedSec.length - released.length} never)` : ''}`,
      )
  }
  for (const f of s.families)
    out.push(
      `  ${f.family} (keyed family, ${f.keys.toLocaleString('en-US')} keys)`,
      `    keys asked for                    ${f.keysSeen.toLocaleString('en-US')}; ${f.checks.toLocaleString('en-US')} checks, ${pct(f.checks > 0 ? f.admitted / f.checks : 0)} admitted`,
      `    over capacity·t + burst, per key  ${f.keysOverBound} key(s); ${f.worstExcess > 0 ? `${f.worstExcess.toFixed(2)} tokens over at worst` : `the tightest ${(-f.worstExcess).toFixed(2)} tokens inside`}`,
      `    the hottest keys' due             least ${pct(f.hottestShareMin)}, mean ${pct(f.hottestShareMean)} of min(capacity, demand) outside failovers`,
      `    first checks admitted             ${f.firstAdmitted.toLocaleString('en-US')} of ${f.firstChecks.toLocaleString('en-US')} (${pct(f.firstChecks > 0 ? f.firstAdmitted / f.firstChecks : 1)})`,
      `    leased one by one at the end      ${f.hotKeysAtEnd} key(s)`,
    )
  for (const c of s.checks) out.push(`  ${c.ok ? 'ok  ' : 'FAIL'} ${c.name}: ${c.detail}`)
  return out.join('\n') + '\n'
}

/** Summary as JSON (numbers rounded for reading; the CSV has the series). */
export function toJson(result: SimResult): string {
  // Without the wall-clock time, so the file is the same on every run of the same scenario.
  return JSON.stringify(
    result.summary,
    (k, v: unknown) =>
      k === 'wallMs'
        ? undefined
        : typeof v === 'number' && !Number.isInteger(v)
          ? Math.round(v * 1e6) / 1e6
          : v,
    2,
  )
}
