import { kindTraits, type ResourceKind } from '../../../shared/index.js'
import type { ClientDetail, ResourceSummary } from '../../http/index.js'
import type { Samples, TopData } from './feed.js'
import { sparkline } from './sparkline.js'

/** What the operator has chosen: the view, the selected resource, the client order. */
export interface TopUi {
  view: 'resources' | 'clients'
  /** Index into the resource list. */
  selected: number
  sort: ClientSort
}

export const clientSorts = ['refused', 'admitted', 'name', 'lease'] as const
export type ClientSort = (typeof clientSorts)[number]

export interface Screen {
  readonly columns: number
  readonly rows: number
  /** ANSI colours and inverse video for the selection; off for a plain frame. */
  readonly color: boolean
}

const style = {
  bold: ['\x1b[1m', '\x1b[22m'],
  inverse: ['\x1b[7m', '\x1b[27m'],
  red: ['\x1b[31m', '\x1b[39m'],
  yellow: ['\x1b[33m', '\x1b[39m'],
  dim: ['\x1b[2m', '\x1b[22m'],
} as const
type Style = keyof typeof style

/** The same number rule as the dashboard: at most 3 significant figures, thousands grouped. */
export function num(x: number | null | undefined): string {
  if (x === null || x === undefined || !Number.isFinite(x)) return '—'
  const a = Math.abs(x)
  const digits = a >= 100 || a === 0 ? 0 : a >= 10 ? 1 : 2
  return x.toLocaleString('en', { maximumFractionDigits: digits })
}

/** A window's length as the config writes it: `20s`, `1m`, `1h`, `1d`. */
function windowText(ms: number): string {
  for (const [unitMs, unit] of [
    [86_400_000, 'd'],
    [3_600_000, 'h'],
    [60_000, 'm'],
    [1000, 's'],
  ] as const)
    if (ms >= unitMs && ms % unitMs === 0) return `${ms / unitMs}${unit}`
  return `${ms}ms`
}

/**
 * A resource's capacity with its unit; a keyed family's is a key's limit: `20/s/key`,
 * `5 slots/key`, `100/key/1m` (a keyed quota and its window).
 */
export function capacityText(r: ResourceSummary): string {
  const f = r.family
  if (f === undefined) return num(r.capacity) + unitOf(r)
  if (r.kind !== 'quota') return `${num(r.capacity)}${unitOf(r)}/key`
  const window =
    f.windowMs !== undefined
      ? windowText(f.windowMs)
      : f.windowUnit !== undefined
        ? f.windowUnit
        : ''
  return `${num(r.capacity)}/key${window === '' ? '' : `/${window}`}`
}

function pct(x: number): string {
  const p = x * 100
  return (p > 0 && p < 10 ? p.toFixed(1) : p.toFixed(0)) + '%'
}

export function duration(ms: number | null): string {
  if (ms === null || !Number.isFinite(ms)) return '—'
  const s = ms / 1000
  if (s < 10) return `${s.toFixed(1)}s`
  if (s < 120) return `${Math.round(s)}s`
  if (s < 7200) return `${Math.floor(s / 60)}m${String(Math.round(s % 60)).padStart(2, '0')}s`
  return `${Math.floor(s / 3600)}h${String(Math.round((s % 3600) / 60)).padStart(2, '0')}m`
}

function fit(text: string, width: number, align: 'left' | 'right'): string {
  if (width <= 0) return ''
  const t = text.length > width ? text.slice(0, Math.max(0, width - 1)) + '…' : text
  return align === 'left' ? t.padEnd(width) : t.padStart(width)
}

interface Column<Row> {
  readonly title: string
  /** Its width; a flexible column takes what is left, at least this. */
  readonly width: number
  readonly flex?: boolean
  readonly align: 'left' | 'right'
  /** Dropped first when the terminal is narrow (higher goes first). */
  readonly drop: number
  readonly text: (row: Row, width: number) => string
  readonly style?: (row: Row) => Style | undefined
}

/** The columns that fit `width` (dropping by priority), with the flexible one widened. */
function layout<Row>(columns: readonly Column<Row>[], width: number): Array<[Column<Row>, number]> {
  let kept = [...columns]
  const need = (cols: readonly Column<Row>[]) =>
    cols.reduce((sum, c) => sum + c.width, 0) + (cols.length - 1)
  while (need(kept) > width && kept.some((c) => c.drop > 0)) {
    const worst = kept.reduce((a, b) => (b.drop > a.drop ? b : a))
    kept = kept.filter((c) => c !== worst)
  }
  const spare = Math.max(0, width - need(kept))
  const flex = kept.filter((c) => c.flex)
  return kept.map((c) => [
    c,
    c.width + (flex.includes(c) ? Math.floor(spare / Math.max(1, flex.length)) : 0),
  ])
}

class Frame {
  readonly lines: string[] = []
  constructor(readonly screen: Screen) {}

  paint(text: string, s: Style | undefined): string {
    if (!this.screen.color || s === undefined) return text
    return style[s][0] + text + style[s][1]
  }

  /** A line cut or padded to the screen's width. */
  line(text: string, s?: Style): void {
    this.lines.push(this.paint(fit(text, this.screen.columns, 'left'), s))
  }

  /** A row of cells, each already fitted, joined by one space. */
  cells(parts: Array<[string, Style | undefined]>, whole?: Style): void {
    const text = parts.map(([t, s]) => this.paint(t, whole === undefined ? s : undefined))
    const plain = parts.map(([t]) => t).join(' ')
    const pad = ' '.repeat(Math.max(0, this.screen.columns - plain.length))
    this.lines.push(this.paint(text.join(' ') + pad, whole))
  }

  table<Row>(
    columns: readonly Column<Row>[],
    rows: readonly Row[],
    maxRows: number,
    selected: number | undefined,
  ): void {
    const cols = layout(columns, this.screen.columns)
    this.cells(
      cols.map(([c, w]) => [fit(c.title, w, c.align), undefined]),
      'bold',
    )
    // Keep the selection in view.
    const first =
      selected === undefined ? 0 : Math.max(0, Math.min(selected - maxRows + 1, rows.length))
    for (const [i, row] of rows.slice(first, first + maxRows).entries()) {
      const parts = cols.map(([c, w]): [string, Style | undefined] => [
        fit(c.text(row, w), w, c.align),
        c.style?.(row),
      ])
      this.cells(parts, first + i === selected ? 'inverse' : undefined)
    }
    if (rows.length > first + maxRows) this.line(`  … ${rows.length - first - maxRows} more`, 'dim')
  }
}

function usedSeries(kind: ResourceKind, s: Samples | undefined): number[] {
  if (s === undefined) return []
  return s.t.map((_, i) => {
    const cap = s.capacity[i] ?? 0
    const used = kindTraits[kind].refills ? (s.admitted[i] ?? 0) : (s.inFlight[i] ?? 0)
    return cap > 0 ? used / cap : 0
  })
}

function refusedText(r: ResourceSummary): string {
  const all = r.admittedPerSec + r.refusedPerSec
  return r.refusedPerSec > 0 && all > 0
    ? `${num(r.refusedPerSec)} (${pct(r.refusedPerSec / all)})`
    : num(r.refusedPerSec)
}

function stateText(r: ResourceSummary): string {
  if (r.clients === 0) return 'idle'
  if (r.learning) return 'learning'
  // A keyed family: how many of its keys are leased on their own.
  return r.family === undefined ? 'leasing' : `${r.family.hotKeys} hot`
}

function unitOf(r: ResourceSummary): string {
  return kindTraits[r.kind].unitSuffix
}

function resourceColumns(data: TopData): Column<ResourceSummary>[] {
  const max = (id: string) => Math.max(0, ...(data.history.get(id)?.refused ?? []))
  return [
    { title: 'RESOURCE', width: 12, flex: true, align: 'left', drop: 0, text: (r) => r.id },
    {
      title: 'KIND',
      width: 5,
      align: 'left',
      drop: 6,
      text: (r) => kindTraits[r.kind].label,
    },
    {
      title: 'STATE',
      width: 8,
      align: 'left',
      drop: 4,
      text: stateText,
      style: (r) => (r.learning ? 'yellow' : undefined),
    },
    {
      title: 'USED',
      width: 5,
      align: 'right',
      drop: 0,
      // A family's keys each have their own use: no one figure says it (sluice key does).
      text: (r) => (r.family === undefined ? pct(r.utilisation) : '—'),
    },
    {
      title: 'REFUSED/s',
      width: 11,
      align: 'right',
      drop: 0,
      text: refusedText,
      style: (r) => (r.refusedPerSec > 0 ? 'red' : undefined),
    },
    { title: 'ADMIT/s', width: 8, align: 'right', drop: 3, text: (r) => num(r.admittedPerSec) },
    {
      title: 'CAPACITY',
      width: 11,
      align: 'right',
      drop: 1,
      text: capacityText,
    },
    { title: 'LEASED', width: 7, align: 'right', drop: 5, text: (r) => num(r.committed) },
    { title: 'DEMAND', width: 7, align: 'right', drop: 5, text: (r) => num(r.demand) },
    {
      title: 'CLIENTS',
      width: 7,
      align: 'right',
      drop: 2,
      text: (r) => (r.refusing > 0 ? `${r.refusing}!${r.clients}` : String(r.clients)),
      style: (r) => (r.refusing > 0 ? 'red' : undefined),
    },
    {
      title: 'USED (history)',
      width: 14,
      flex: true,
      align: 'left',
      drop: 7,
      text: (r, w) => sparkline(usedSeries(r.kind, data.history.get(r.id)), 1, w),
    },
    {
      title: 'REFUSED (history)',
      width: 17,
      flex: true,
      align: 'left',
      drop: 8,
      text: (r, w) => sparkline(data.history.get(r.id)?.refused ?? [], max(r.id), w),
      style: () => 'red',
    },
  ]
}

function clientName(c: ClientDetail): string {
  return c.name === null ? c.id : `${c.name} (${c.id})`
}

function refusingText(c: ClientDetail): string {
  const u = c.usage
  if (u === null) return '—'
  if (u.refusingForMs !== null) return `for ${duration(u.refusingForMs)}`
  if (u.lastRefusedAgoMs !== null) return `${duration(u.lastRefusedAgoMs)} ago`
  return 'never'
}

function clientColumns(
  detail: ResourceSummary & { clientDetails: ClientDetail[] },
): Column<ClientDetail>[] {
  const hasTenants = detail.clientDetails.some((c) => c.tenant !== null)
  const cols: Column<ClientDetail>[] = [
    { title: 'CLIENT', width: 16, flex: true, align: 'left', drop: 0, text: clientName },
  ]
  if (hasTenants)
    cols.push({ title: 'TENANT', width: 8, align: 'left', drop: 3, text: (c) => c.tenant ?? '—' })
  cols.push(
    {
      title: 'W·P',
      width: 5,
      align: 'right',
      drop: 6,
      text: (c) => `${num(c.weight)}·${c.priority}`,
    },
    { title: 'WANTS', width: 6, align: 'right', drop: 2, text: (c) => num(c.wants) },
    { title: 'EST', width: 6, align: 'right', drop: 5, text: (c) => num(c.estimatedDemand) },
    { title: 'TARGET', width: 6, align: 'right', drop: 4, text: (c) => num(c.target) },
    { title: 'LEASE', width: 6, align: 'right', drop: 0, text: (c) => num(c.lease) },
    {
      title: 'ADMIT/s',
      width: 7,
      align: 'right',
      drop: 1,
      text: (c) => num(c.usage?.admittedPerSec ?? 0),
    },
    {
      title: 'REFUSED/s',
      width: 9,
      align: 'right',
      drop: 0,
      text: (c) => num(c.usage?.refusedPerSec ?? 0),
      style: (c) => ((c.usage?.refusedPerSec ?? 0) > 0 ? 'red' : undefined),
    },
    {
      title: 'REFUSING',
      width: 10,
      align: 'right',
      drop: 0,
      text: refusingText,
      style: (c) => (c.usage?.refusingForMs !== null && c.usage !== null ? 'red' : undefined),
    },
  )
  if (kindTraits[detail.kind].holdsInFlight)
    cols.push({
      title: 'INFLIGHT',
      width: 8,
      align: 'right',
      drop: 2,
      text: (c) => num(c.usage?.inFlight ?? 0),
    })
  cols.push({
    title: 'AGE',
    width: 6,
    align: 'right',
    drop: 7,
    text: (c) => duration(c.leaseAgeMs),
  })
  return cols
}

/** Clients in the chosen order (ties by id, so rows do not jump). */
export function sortClients(clients: readonly ClientDetail[], sort: ClientSort): ClientDetail[] {
  const key = (c: ClientDetail): number | string =>
    sort === 'refused'
      ? -(c.usage?.refusedPerSec ?? 0)
      : sort === 'admitted'
        ? -(c.usage?.admittedPerSec ?? 0)
        : sort === 'lease'
          ? -c.lease
          : clientName(c)
  return [...clients].sort((a, b) => {
    const x = key(a)
    const y = key(b)
    const order = typeof x === 'string' ? x.localeCompare(y as string) : x - (y as number)
    return order || a.id.localeCompare(b.id)
  })
}

function roleText(data: TopData): string {
  if (data.role === 'follower') return `follower → leader ${data.leader ?? 'not known yet'}`
  if (data.learning.length > 0) return `${data.role} · learning ${data.learning.join(', ')}`
  return data.role
}

function clock(ms: number | undefined): string {
  return ms === undefined ? '--:--:--' : new Date(ms).toISOString().slice(11, 19)
}

/** One screen of `sluice top`, as lines no wider than the screen. */
export function renderTop(data: TopData, ui: TopUi, screen: Screen): string[] {
  const f = new Frame(screen)
  const selected = data.resources[ui.selected]
  if (ui.view === 'clients' && selected !== undefined) {
    const d = data.detail
    f.line(`sluice top · ${data.url} · ${roleText(data)} · ${clock(data.updatedAtMs)} UTC`, 'bold')
    const r = d ?? selected
    f.line(
      `${r.id} · ${r.kind} · ${stateText(r)} · used ${pct(r.utilisation)} · refused ${refusedText(r)}/s · ` +
        `admitted ${num(r.admittedPerSec)}/s · capacity ${num(r.capacity)}${unitOf(r)} · leased ${num(r.committed)} · demand ${num(r.demand)} · ${r.clients} clients`,
    )
    const h = data.history.get(r.id)
    const w = Math.max(0, screen.columns - 10)
    f.line(`used      ${sparkline(usedSeries(r.kind, h), 1, w)}`)
    f.cells([
      ['refused  ', undefined],
      [sparkline(h?.refused ?? [], Math.max(0, ...(h?.refused ?? [])), w), 'red'],
    ])
    f.line('')
    if (d === undefined) f.line('no client uses this resource now')
    else
      f.table(
        clientColumns(d),
        sortClients(d.clientDetails, ui.sort),
        Math.max(1, screen.rows - f.lines.length - 3),
        undefined,
      )
  } else {
    f.line(`sluice top · ${data.url} · ${roleText(data)} · ${clock(data.updatedAtMs)} UTC`, 'bold')
    f.line('')
    if (data.resources.length === 0) f.line('no resource is configured or has clients')
    else
      f.table(
        resourceColumns(data),
        data.resources,
        Math.max(1, screen.rows - f.lines.length - 3),
        ui.selected,
      )
  }
  while (f.lines.length < screen.rows - 1) f.line('')
  if (data.error !== undefined) f.line(data.error, 'red')
  else
    f.line(
      ui.view === 'clients'
        ? `esc back · s sort (by ${ui.sort}) · q quit`
        : data.resources.some((r) => r.refusing > 0)
          ? '↑↓ select · enter clients · q quit · a!b: a of b clients refused'
          : '↑↓ select · enter clients · q quit',
      'dim',
    )
  return f.lines.slice(0, screen.rows)
}
