import { kindTraits } from '../../shared/index.js'
import type { SimResult } from './run.js'

const width = 900
const panel = 260
const margin = { left: 60, right: 170, top: 30, bottom: 30 }
const palette = [
  '#1f77b4',
  '#ff7f0e',
  '#2ca02c',
  '#d62728',
  '#9467bd',
  '#8c564b',
  '#e377c2',
  '#17becf',
]

function escape(text: string): string {
  return text.replace(/[<>&"]/g, (c) => `&#${c.charCodeAt(0)};`)
}

function path(
  xs: readonly number[],
  ys: readonly number[],
  x: (v: number) => number,
  y: (v: number) => number,
): string {
  return xs
    .map((v, i) => `${i === 0 ? 'M' : 'L'}${x(v).toFixed(1)},${y(ys[i]!).toFixed(1)}`)
    .join('')
}

/**
 * One SVG per resource: admitted rate, demand and capacity over time (top);
 * each tracked client's grant (solid) against its ideal max-min share
 * (dashed) below.
 */
export function toSvg(result: SimResult, resource: string): string {
  const rows = result.rows.filter((r) => r.resource === resource)
  const ts = rows.map((r) => r.tSec)
  const tMax = Math.max(1, ...ts)
  const plotW = width - margin.left - margin.right
  const x = (t: number): number => margin.left + (t / tMax) * plotW
  const parts: string[] = []
  const axes = (top: number, yMax: number, label: string): ((v: number) => number) => {
    const y = (v: number): number =>
      top + panel - (Math.min(v, yMax * 1.05) / (yMax * 1.05)) * panel
    parts.push(
      `<rect x="${margin.left}" y="${top}" width="${plotW}" height="${panel}" fill="none" stroke="#999"/>`,
      `<text x="${margin.left}" y="${top - 8}" font-size="13">${escape(label)}</text>`,
    )
    for (let i = 0; i <= 4; i++) {
      const v = (yMax * i) / 4
      parts.push(
        `<text x="${margin.left - 6}" y="${y(v) + 4}" font-size="10" text-anchor="end">${yMax < 20 ? v.toFixed(1) : Math.round(v)}</text>`,
      )
    }
    for (let i = 0; i <= 5; i++) {
      const t = (tMax * i) / 5
      parts.push(
        `<text x="${x(t)}" y="${top + panel + 14}" font-size="10" text-anchor="middle">${Math.round(t)} s</text>`,
      )
    }
    return y
  }
  const legend = (top: number, i: number, color: string, text: string, dashed = false): void => {
    const ly = top + 14 + i * 16
    const lx = width - margin.right + 10
    parts.push(
      `<line x1="${lx}" y1="${ly - 4}" x2="${lx + 20}" y2="${ly - 4}" stroke="${color}" stroke-width="2"${dashed ? ' stroke-dasharray="4 3"' : ''}/>`,
      `<text x="${lx + 26}" y="${ly}" font-size="11">${escape(text)}</text>`,
    )
  }

  const top1 = margin.top
  const yMax1 = Math.max(
    1,
    ...rows.map((r) => Math.max(r.capacity, r.admittedRate, Math.min(r.demand, r.capacity * 2))),
  )
  const y1 = axes(
    top1,
    yMax1,
    `${result.scenario.name} · ${resource}: ${rows[0]?.capacity !== undefined && result.scenario.resources.some((r) => r.match === resource && kindTraits[r.kind].holdsInFlight) ? 'slots in flight against capacity' : 'admitted rate against capacity (tokens/s)'}`,
  )
  const series1: [string, number[], string, boolean][] = [
    ['capacity', rows.map((r) => r.capacity), '#000', true],
    ['demand', rows.map((r) => r.demand), '#aaa', false],
    ['admitted', rows.map((r) => r.admittedRate), '#1f77b4', false],
  ]
  for (const [i, [name, ys, color, dashed]] of series1.entries()) {
    parts.push(
      `<path d="${path(ts, ys, x, y1)}" fill="none" stroke="${color}" stroke-width="1.5"${dashed ? ' stroke-dasharray="4 3"' : ''}/>`,
    )
    legend(top1, i, color, name, dashed)
  }

  const top2 = top1 + panel + 50
  const tracked = result.tracked.filter((c) => c.resource === resource)
  const yMax2 = Math.max(1, ...tracked.flatMap((c) => [...c.grants, ...c.ideals]))
  const y2 = axes(top2, yMax2, 'grant (solid) against ideal max-min share (dashed), per client')
  for (const [i, c] of tracked.entries()) {
    const color = palette[i % palette.length]!
    parts.push(
      `<path d="${path(ts, c.ideals, x, y2)}" fill="none" stroke="${color}" stroke-width="1" stroke-dasharray="4 3"/>`,
      `<path d="${path(ts, c.grants, x, y2)}" fill="none" stroke="${color}" stroke-width="1.5"/>`,
    )
    legend(top2, i, color, c.id)
  }

  const height = top2 + panel + margin.bottom
  return `<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${height}" viewBox="0 0 ${width} ${height}" font-family="sans-serif">
<rect width="100%" height="100%" fill="#fff"/>
${parts.join('\n')}
</svg>
`
}
