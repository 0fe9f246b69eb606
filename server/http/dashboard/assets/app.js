// Sluice dashboard: routes on the path (pushState), polls the JSON status API
// every second, charts each resource's history with uPlot. Plain browser
// script, no build step; the coordinator serves it with a CSP that allows
// only its own origin.
'use strict'

const refreshMs = 1000
/** Resources charted on the overview (the rest show their figures only). */
const maxOverviewCharts = 24
const overviewRangeS = 300
const ranges = [
  ['5m', 300],
  ['15m', 900],
  ['1h', 3600],
  ['6h', 21600],
  ['24h', 86400],
]
const colors = {
  capacity: '#6b7280',
  committed: '#1f77b4',
  demand: '#ff7f0e',
  admitted: '#2ca02c',
  refused: '#d62728',
  inFlight: '#2ca02c',
  waiting: '#9467bd',
}

const state = {
  route: { view: 'overview' },
  resources: [],
  /** id → { t: [], columns: {} } samples held for the charts */
  history: new Map(),
  /** id → { plot, el, kind, rangeS } */
  charts: new Map(),
  detail: null,
  tenants: null,
  families: null,
  sort: { key: 'name', dir: 1 },
  /** Clients whose own chart is open, in the resource view. */
  expanded: new Set(),
  rangeS: 900,
  busy: false,
  tick: 0,
}

// ---------- formatting ----------

/** Same rule everywhere: 3 significant figures at most, thousands grouped, no trailing zeros. */
function num(x) {
  if (x === null || x === undefined || !Number.isFinite(x)) return '—'
  const a = Math.abs(x)
  const digits = a >= 100 || a === 0 ? 0 : a >= 10 ? 1 : 2
  return x.toLocaleString('en', { maximumFractionDigits: digits })
}
function pct(x) {
  if (!Number.isFinite(x)) return '—'
  const p = x * 100
  return (p > 0 && p < 10 ? p.toFixed(1) : p.toFixed(0)) + '%'
}
function duration(ms) {
  if (ms === null || ms === undefined || !Number.isFinite(ms)) return '—'
  const s = ms / 1000
  if (s < 10) return s.toFixed(1) + ' s'
  if (s < 120) return Math.round(s) + ' s'
  if (s < 7200) return Math.floor(s / 60) + ' min ' + Math.round(s % 60) + ' s'
  return Math.floor(s / 3600) + ' h ' + Math.round((s % 3600) / 60) + ' min'
}
/** The unit of a resource's capacity, committed and demand. */
function unit(kind) {
  return kind === 'rate' ? 'tokens/s' : kind === 'quota' ? 'units' : 'slots'
}
function el(tag, attrs, ...children) {
  const e = document.createElement(tag)
  for (const [k, v] of Object.entries(attrs ?? {})) {
    if (v === undefined || v === null || v === false) continue
    if (k === 'class') e.className = v
    else if (k === 'text') e.textContent = v
    else e.setAttribute(k, v === true ? '' : String(v))
  }
  for (const c of children) if (c !== null && c !== undefined) e.append(c)
  return e
}
function resourceHref(id) {
  return '/dashboard/resources/' + encodeURIComponent(id)
}
function apiPath(id) {
  return '/v1/resources/' + encodeURIComponent(id)
}

// ---------- data ----------

class AuthNeeded extends Error {}

function headers() {
  const token = sessionStorage.getItem('sluice-token')
  return token ? { authorization: 'Bearer ' + token } : {}
}
async function get(path) {
  const res = await fetch(path, { cache: 'no-store', headers: headers() })
  if (res.status === 401) {
    sessionStorage.removeItem('sluice-token')
    throw new AuthNeeded('a token is needed')
  }
  return res
}
async function json(path) {
  const res = await get(path)
  if (!res.ok) {
    const body = await res.json().catch(() => null)
    const error = new Error(body?.error?.message ?? res.status + ' ' + res.statusText)
    error.status = res.status
    throw error
  }
  return res.json()
}

/** Fetches only the samples newer than those held, and drops those older than the range. */
async function updateHistory(id, rangeS) {
  let held = state.history.get(id)
  if (held === undefined || held.rangeS !== rangeS) {
    held = { rangeS, t: [], columns: null }
    state.history.set(id, held)
  }
  const last = held.t.length > 0 ? held.t[held.t.length - 1] : undefined
  const range = ranges.find(([, s]) => s === rangeS)?.[0] ?? '15m'
  const query = last === undefined ? 'range=' + range : 'range=' + range + '&from=' + (last + 1)
  const res = await get(apiPath(id) + '/history?' + query)
  if (!res.ok) return held
  const h = await res.json()
  // A coarser step than held (the range grew past the seconds ring): start over.
  if (held.stepMs !== undefined && held.stepMs !== h.stepMs) {
    held.t = []
    held.columns = null
  }
  held.stepMs = h.stepMs
  if (held.columns === null) {
    held.columns = {}
    for (const k of Object.keys(h)) if (Array.isArray(h[k]) && k !== 't') held.columns[k] = []
  }
  held.t.push(...h.t)
  for (const k of Object.keys(held.columns)) held.columns[k].push(...(h[k] ?? []))
  const oldest = h.to - rangeS * 1000
  let drop = 0
  while (drop < held.t.length && held.t[drop] < oldest) drop++
  if (drop > 0) {
    held.t.splice(0, drop)
    for (const k of Object.keys(held.columns)) held.columns[k].splice(0, drop)
  }
  return held
}

// ---------- charts ----------

function chartSeries(kind) {
  const value = (_u, v) => (v === null || v === undefined ? '—' : num(v))
  const line = (label, color, extra) => ({ label, stroke: color, width: 1.5, value, ...extra })
  if (kind.startsWith('client'))
    return [
      {},
      line('admitted', colors.admitted, { fill: 'rgba(44,160,44,0.10)' }),
      line('refused', colors.refused, { fill: 'rgba(214,39,40,0.10)' }),
    ]
  // Capacity is drawn last, wider and dashed, so it shows over a committed line at the same
  // height (a resource fully leased: the usual case).
  const capacity = line('capacity', colors.capacity, { dash: [6, 4], width: 2.5 })
  const common = [{}, line('committed', colors.committed), line('demand', colors.demand)]
  if (kind === 'rate' || kind === 'quota')
    return [
      ...common,
      line('admitted', colors.admitted, { fill: 'rgba(44,160,44,0.10)' }),
      line('refused', colors.refused, { fill: 'rgba(214,39,40,0.10)' }),
      capacity,
    ]
  return [
    ...common,
    line('in flight', colors.inFlight, { fill: 'rgba(44,160,44,0.10)' }),
    line('waiting', colors.waiting),
    line('admitted', '#17becf', { scale: 'ops', dash: [2, 3] }),
    line('refused', colors.refused, { scale: 'ops' }),
    capacity,
  ]
}
/** The columns of each chart, in the order of its series. */
function chartColumns(kind) {
  if (kind.startsWith('client')) return ['admitted', 'refused']
  if (kind === 'rate' || kind === 'quota')
    return ['committed', 'demand', 'admitted', 'refused', 'capacity']
  return ['committed', 'demand', 'inFlight', 'waiting', 'admitted', 'refused', 'capacity']
}
/**
 * The samples with a null where a step or more is missing (the coordinator was down, the
 * resource had no clients): uPlot draws a gap there instead of a straight line across.
 */
function withGaps(held, keys) {
  const c = held.columns ?? {}
  const stepMs = held.stepMs ?? 1000
  const t = []
  const cols = keys.map(() => [])
  let gaps = 0
  for (let i = 0; i < held.t.length; i++) {
    if (i > 0 && held.t[i] - held.t[i - 1] > 1.5 * stepMs) {
      t.push((held.t[i - 1] + stepMs) / 1000)
      for (const col of cols) col.push(null)
      gaps++
    }
    t.push(held.t[i] / 1000)
    keys.forEach((k, j) => cols[j].push(c[k]?.[i] ?? null))
  }
  return { data: [t, ...cols], gaps }
}
function chartData(kind, held) {
  return withGaps(held, chartColumns(kind)).data
}
function makeChart(container, kind, height, live) {
  const tick = (_u, values) => values.map((v) => num(v))
  const axes = [
    { stroke: '#4b5563', grid: { stroke: '#eceef1' } },
    {
      stroke: '#4b5563',
      grid: { stroke: '#eceef1' },
      label:
        kind === 'client-concurrency'
          ? 'acquires/s'
          : kind === 'client-rate'
            ? 'tokens/s'
            : unit(kind),
      size: 56,
      values: tick,
    },
  ]
  const scales = {
    x: { time: true },
    y: { range: (_u, _min, max) => [0, Math.max(1, max) * 1.08] },
  }
  if (kind === 'concurrency') {
    axes.push({
      scale: 'ops',
      side: 1,
      stroke: '#4b5563',
      grid: { show: false },
      label: 'acquires/s',
      size: 56,
      values: tick,
    })
    scales.ops = { range: (_u, _min, max) => [0, Math.max(1, max) * 1.08] }
  }
  const width = Math.max(200, container.clientWidth)
  return new uPlot(
    {
      width,
      height,
      series: chartSeries(kind),
      axes,
      scales,
      cursor: { drag: { x: false, y: false } },
      legend: { live },
      hooks: live
        ? {
            // Off the chart, the legend shows the latest sample (under the cursor, the one there).
            setLegend: [
              (u) => {
                if (u.legend.idx == null && u.data[0].length > 0)
                  u.setLegend({ idx: u.data[0].length - 1 }, false)
              },
            ],
          }
        : {},
    },
    chartData(kind, { t: [], columns: null }),
    container,
  )
}

/** The chart of a resource in `slot` (created once, then fed), and its caption. */
function drawChart(slot, id, kind, held, height, rangeS) {
  let chart = state.charts.get(slot)
  if (chart === undefined || chart.kind !== kind || chart.id !== id) {
    chart?.plot.destroy()
    slot.replaceChildren()
    const box = el('div', { class: 'chart' })
    const caption = el('div', { class: 'chart-caption' })
    slot.append(box, caption)
    chart = { id, kind, box, caption, plot: makeChart(box, kind, height, height > 200) }
    state.charts.set(slot, chart)
    new ResizeObserver(() => {
      const w = Math.max(200, box.clientWidth)
      if (w !== chart.plot.width) chart.plot.setSize({ width: w, height })
    }).observe(box)
  }
  const { data, gaps } = withGaps(held, chartColumns(kind))
  chart.plot.setData(data)
  const n = held.t.length
  chart.box.dataset.points = String(n)
  chart.box.dataset.gaps = String(gaps)
  chart.box.dataset.series = chartSeries(kind)
    .slice(1)
    .map((s) => s.label)
    .join(',')
  const c = held.columns ?? {}
  const lastOf = (k) => (n > 0 && c[k] ? c[k][n - 1] : null)
  // How long the refusals have gone on: the latest unbroken run of samples with any.
  let run = 0
  const refused = c.refused ?? []
  for (let i = n - 1; i >= 0 && refused[i] > 0; i--) run++
  const step = held.stepMs ?? 1000
  const parts = []
  if (kind !== 'concurrency') {
    parts.push('admitted ' + num(lastOf('admitted')) + '/s')
    parts.push('refused ' + num(lastOf('refused')) + '/s')
  } else {
    parts.push('in flight ' + num(lastOf('inFlight')) + ' slots')
    parts.push('refused ' + num(lastOf('refused')) + ' acquires/s')
  }
  if (run > 0) parts.push('refusing for ' + duration(run * step))
  chart.caption.textContent =
    n === 0 ? 'no samples yet' : rangeLabel(rangeS) + ': ' + parts.join(' · ')
  chart.caption.dataset.refused = String(lastOf('refused') ?? 0)
  chart.caption.dataset.admitted = String(lastOf('admitted') ?? 0)
}
function rangeLabel(rangeS) {
  return 'last ' + (ranges.find(([, s]) => s === rangeS)?.[0] ?? rangeS + 's')
}
function dropCharts() {
  for (const chart of state.charts.values()) chart.plot.destroy()
  state.charts.clear()
}

// ---------- figures ----------

function figure(label, value, unitText, cls) {
  return el(
    'div',
    { class: 'figure' },
    el('span', { class: 'label', text: label }),
    el(
      'span',
      { class: 'value' + (cls ? ' ' + cls : '') },
      value,
      unitText ? el('span', { class: 'unit', text: unitText }) : null,
    ),
  )
}
function refusedShare(r) {
  const all = r.admittedPerSec + r.refusedPerSec
  return all > 0 ? r.refusedPerSec / all : 0
}
function resourceFigures(r) {
  const meter = el('div', { class: 'meter' })
  const bar = el('span', { class: r.utilisation > 1 ? 'over' : '' })
  bar.style.width = Math.min(100, r.utilisation * 100) + '%'
  meter.append(bar)
  const used = figure('used', pct(r.utilisation), '', 'big')
  used.dataset.figure = 'used'
  used.append(meter)
  const refused = figure(
    'refused',
    num(r.refusedPerSec),
    (r.kind === 'concurrency' ? ' acq/s' : '/s') +
      (r.refusedPerSec > 0 ? ' (' + pct(refusedShare(r)) + ')' : ''),
    refusingMuch(r.admittedPerSec, r.refusedPerSec) ? 'big bad' : 'big',
  )
  refused.dataset.figure = 'refused'
  const items = [
    used,
    refused,
    r.kind === 'concurrency'
      ? figure('in flight', num(r.inFlight), 'slots')
      : figure('admitted', num(r.admittedPerSec), '/s'),
    figure('capacity', num(r.capacity), unit(r.kind)),
    figure('leased', num(r.committed), unit(r.kind)),
    figure('demand', num(r.demand), unit(r.kind)),
    figure('clients', num(r.clients), r.refusing > 0 ? r.refusing + ' refusing' : ''),
  ]
  if (r.quota) {
    // A quota: what is left of this window's budget, and when a new one opens.
    const remaining = figure('remaining', num(r.quota.remaining), 'of ' + num(r.capacity))
    remaining.dataset.figure = 'remaining'
    const ends = figure('window ends in', duration(r.quota.endsInMs), '')
    ends.dataset.figure = 'window-ends'
    items.splice(2, 0, remaining, ends)
  }
  if (r.waiting > 0 || r.kind === 'concurrency')
    items.push(figure('waiting', num(r.waiting), 'callers'))
  return el('div', { class: 'figures' }, ...items)
}
/**
 * Whether refusals are worth a colour: 1% of what is asked or more (the coordinator's rule for
 * a client "refusing"). A resource whose clients get what they ask for but refuse a stray
 * request now and then (a burst over the bucket) is not shown refusing.
 */
function refusingMuch(admittedPerSec, refusedPerSec) {
  const refused = refusedPerSec ?? 0
  return refused > 0 && refused >= 0.01 * ((admittedPerSec ?? 0) + refused)
}
function badges(r) {
  const out = []
  if (r.clients === 0) out.push(el('span', { class: 'badge idle', text: 'no clients' }))
  else if (r.learning) out.push(el('span', { class: 'badge learning', text: 'learning' }))
  else out.push(el('span', { class: 'badge leasing', text: 'leasing' }))
  if (refusingMuch(r.admittedPerSec, r.refusedPerSec) || r.refusing > 0)
    out.push(el('span', { class: 'badge refusing', text: 'refusing' }))
  out.push(el('span', { class: 'badge', text: r.kind }))
  return el('span', {}, ...out.flatMap((b) => [b, ' ']))
}

// ---------- views ----------

async function renderOverview(main) {
  const { resources } = await json('/v1/resources')
  state.resources = resources
  let cards = main.querySelector('.cards')
  if (cards === null) {
    main.replaceChildren(el('h1', { text: 'Resources' }))
    cards = el('div', { class: 'cards' })
    main.append(cards)
  }
  if (resources.length === 0) {
    cards.replaceChildren(el('p', { class: 'muted', text: 'No resources yet.' }))
    return
  }
  const keep = new Set()
  const charted = []
  resources.forEach((r, i) => {
    keep.add(r.id)
    let card = cards.querySelector('[data-id="' + CSS.escape(r.id) + '"]')
    if (card === null) {
      card = el('section', { class: 'card', 'data-id': r.id })
      const head = el('div', { class: 'card-head' })
      card.append(head, el('div', { class: 'figs' }), el('div', { class: 'slot' }))
      cards.append(card)
    }
    // Keep the cards in the order of the list (sorted by id).
    if (cards.children[i] !== card) cards.insertBefore(card, cards.children[i] ?? null)
    card.classList.toggle('refusing', refusingMuch(r.admittedPerSec, r.refusedPerSec))
    card
      .querySelector('.card-head')
      .replaceChildren(
        el('a', { href: resourceHref(r.id), 'data-route': true, text: r.id }),
        badges(r),
      )
    card.querySelector('.figs').replaceChildren(resourceFigures(r))
    if (i < maxOverviewCharts && r.clients > 0) charted.push([r, card.querySelector('.slot')])
  })
  for (const card of [...cards.querySelectorAll('section.card')])
    if (!keep.has(card.dataset.id)) {
      const slot = card.querySelector('.slot')
      state.charts.get(slot)?.plot.destroy()
      state.charts.delete(slot)
      card.remove()
    }
  await Promise.all(
    charted.map(async ([r, slot]) => {
      const held = await updateHistory(r.id, overviewRangeS)
      drawChart(slot, r.id, r.kind, held, 150, overviewRangeS)
    }),
  )
}

function refusals(c) {
  const u = c.usage
  if (u?.refusingForMs !== null && u?.refusingForMs !== undefined)
    return 'for ' + duration(u.refusingForMs)
  if (u?.lastRefusedAgoMs !== null && u?.lastRefusedAgoMs !== undefined)
    return duration(u.lastRefusedAgoMs) + ' ago'
  return 'never'
}

/** The client table's columns; `when` leaves a column out of tables it says nothing in. */
const clientColumns = [
  { key: 'name', label: 'client', get: (c) => c.name ?? c.id },
  {
    key: 'tenant',
    label: 'tenant',
    get: (c) => c.tenant ?? '',
    when: (d) => d.clientDetails.some((c) => c.tenant !== null),
  },
  {
    key: 'weight',
    label: 'weight · priority',
    title: 'weight · priority',
    get: (c) => c.weight * 1e6 + c.priority,
    show: (c) => num(c.weight) + ' · ' + c.priority,
  },
  { key: 'wants', label: 'wants', get: (c) => c.wants },
  { key: 'estimate', label: 'estimate', title: 'estimated demand', get: (c) => c.estimatedDemand },
  { key: 'target', label: 'target', get: (c) => c.target },
  { key: 'lease', label: 'lease', get: (c) => c.lease },
  { key: 'admitted', label: 'admitted/s', get: (c) => c.usage?.admittedPerSec ?? 0 },
  { key: 'refused', label: 'refused/s', get: (c) => c.usage?.refusedPerSec ?? 0 },
  {
    key: 'refusals',
    label: 'refusing',
    title: 'refusing for how long, or when it last refused',
    get: (c) =>
      c.usage?.refusingForMs ??
      (c.usage?.lastRefusedAgoMs == null ? -Infinity : -c.usage.lastRefusedAgoMs),
    show: refusals,
  },
  {
    key: 'inFlight',
    label: 'in flight',
    get: (c) => c.usage?.inFlight ?? 0,
    when: (d) => d.kind === 'concurrency',
  },
  {
    key: 'leaseAge',
    label: 'lease age',
    get: (c) => c.leaseAgeMs ?? Infinity,
    show: (c) => duration(c.leaseAgeMs),
  },
]

function clientTable(detail) {
  const columns = clientColumns.filter((col) => col.when === undefined || col.when(detail))
  const sort = state.sort
  const byKey = columns.find((c) => c.key === sort.key) ?? columns[0]
  const rows = [...detail.clientDetails].sort((a, b) => {
    const x = byKey.get(a)
    const y = byKey.get(b)
    const order = typeof x === 'string' ? x.localeCompare(y) : x - y
    return order * sort.dir || a.id.localeCompare(b.id)
  })
  const head = el(
    'tr',
    {},
    ...columns.map((col) => {
      const th = el('th', {
        class: 'sortable',
        scope: 'col',
        'data-key': col.key,
        'aria-sort': col.key === byKey.key ? (sort.dir > 0 ? 'ascending' : 'descending') : null,
        tabindex: 0,
        title: col.title,
        text: col.label,
      })
      return th
    }),
  )
  const body = el('tbody')
  for (const c of rows) {
    const refusing = (c.usage?.refusingForMs ?? null) !== null
    const tr = el('tr', { 'data-client': c.id, class: refusing ? 'refusing' : null })
    for (const col of columns) {
      if (col.key === 'name') {
        const dot = el('span', {
          class: c.connected ? 'dot' : 'dot off',
          title: c.connected ? 'connected' : 'not connected',
        })
        const sub = [c.name !== null ? c.id : null, c.library].filter(Boolean).join(' · ')
        tr.append(
          el(
            'td',
            { class: 'name', 'data-label': col.label },
            dot,
            c.name ?? c.id,
            sub ? el('small', { text: sub }) : null,
          ),
        )
        continue
      }
      const text = col.show
        ? col.show(c)
        : typeof col.get(c) === 'number'
          ? num(col.get(c))
          : col.get(c) || '—'
      tr.append(el('td', { 'data-label': col.label, text }))
    }
    body.append(tr)
  }
  return el('table', { class: 'stack', id: 'clients' }, el('thead', {}, head), body)
}

async function renderResource(main, id) {
  const res = await get(apiPath(id))
  if (res.status === 404) {
    dropCharts()
    main.replaceChildren(
      el('p', {}, el('a', { href: '/dashboard/', 'data-route': true, text: '← all resources' })),
      el('h1', { text: id }),
      el('p', { class: 'muted', text: 'No client uses this resource now.' }),
    )
    return
  }
  if (!res.ok) throw new Error(res.status + ' ' + res.statusText)
  const detail = await res.json()
  state.detail = detail
  let view = main.querySelector('.resource-view')
  if (view === null || view.dataset.id !== id) {
    dropCharts()
    view = el('div', { class: 'resource-view', 'data-id': id })
    const rangeButtons = el(
      'div',
      { class: 'ranges', role: 'group', 'aria-label': 'time range' },
      ...ranges.map(([label, s]) =>
        el('button', {
          type: 'button',
          'data-range': s,
          'aria-pressed': s === state.rangeS ? 'true' : 'false',
          text: label,
        }),
      ),
    )
    view.append(
      el('p', {}, el('a', { href: '/dashboard/', 'data-route': true, text: '← all resources' })),
      el(
        'h1',
        {},
        el('span', { class: 'title', text: id }),
        ' ',
        el('span', { class: 'head-badges' }),
      ),
      el(
        'div',
        { class: 'panel' },
        el('div', { class: 'figs' }),
        rangeButtons,
        el('div', { class: 'slot' }),
      ),
      el('h2', { text: 'Clients' }),
      el('p', { class: 'muted hint', text: 'Click a client to chart its last 5 minutes.' }),
      el('div', { class: 'panel table-wrap clients-slot' }),
      el('div', { class: 'client-charts cards' }),
    )
    main.replaceChildren(view)
  }
  view.querySelector('.head-badges').replaceChildren(badges(detail))
  view.querySelector('.figs').replaceChildren(resourceFigures(detail))
  view.querySelector('.clients-slot').replaceChildren(clientTable(detail))
  const held = await updateHistory(id, state.rangeS)
  drawChart(view.querySelector('.slot'), id, detail.kind, held, 260, state.rangeS)
  await drawClientCharts(view.querySelector('.client-charts'), detail)
}

/** A chart of each client opened in the table: its admitted and refused over the last minutes. */
async function drawClientCharts(box, detail) {
  for (const card of [...box.children])
    if (!state.expanded.has(card.dataset.client)) {
      const slot = card.querySelector('.slot')
      state.charts.get(slot)?.plot.destroy()
      state.charts.delete(slot)
      card.remove()
    }
  await Promise.all(
    [...state.expanded].map(async (clientId) => {
      const c = detail.clientDetails.find((x) => x.id === clientId)
      if (c === undefined) return
      let card = box.querySelector('[data-client="' + CSS.escape(clientId) + '"]')
      if (card === null) {
        card = el(
          'section',
          { class: 'card client-chart', 'data-client': clientId },
          el(
            'div',
            { class: 'card-head' },
            el('strong', { text: c.name ?? c.id }),
            el('span', { class: 'muted', text: c.id }),
          ),
          el('div', { class: 'slot' }),
        )
        box.append(card)
      }
      const res = await get(apiPath(detail.id) + '/history?client=' + encodeURIComponent(clientId))
      if (!res.ok) return
      const h = await res.json()
      const held = {
        t: h.t,
        stepMs: h.stepMs,
        columns: { admitted: h.admitted, refused: h.refused },
      }
      drawChart(
        card.querySelector('.slot'),
        detail.id + '\u0000' + clientId,
        'client-' + detail.kind,
        held,
        140,
        300,
      )
    }),
  )
}

/** A table that becomes a list on a phone: a head of `labels`, a body of `rows`. */
function stackTable(labels, rows) {
  return el(
    'table',
    { class: 'stack' },
    el('thead', {}, el('tr', {}, ...labels.map((l) => el('th', { text: l })))),
    el('tbody', {}, ...rows),
  )
}

async function renderTenants(main) {
  const { tenants } = await json('/v1/tenants')
  state.tenants = tenants
  dropCharts()
  const out = [el('h1', { text: 'Tenants' })]
  if (tenants.length === 0)
    out.push(el('p', { class: 'muted', text: 'No tenants are configured.' }))
  for (const t of tenants) {
    const head = el(
      'h2',
      {},
      t.name + ' ',
      el('span', {
        class: 'muted',
        text:
          'weight ' +
          num(t.weight) +
          ' · ' +
          t.clients +
          ' client' +
          (t.clients === 1 ? '' : 's') +
          (t.maxClients === null ? '' : ' of ' + t.maxClients) +
          ' · priorities ' +
          t.priorities.join('…'),
      }),
    )
    const panel = el('div', { class: 'panel table-wrap', 'data-tenant': t.name })
    if (t.resources.length === 0)
      panel.append(el('p', { class: 'muted', text: 'No client of this tenant holds a lease now.' }))
    else {
      const labels = ['resource', 'cap', 'clients', 'wants', 'lease', 'admitted/s', 'refused/s']
      const rows = t.resources.map((r) =>
        el(
          'tr',
          {},
          el(
            'td',
            { class: 'name', 'data-label': labels[0] },
            el('a', { href: resourceHref(r.id), 'data-route': true, text: r.id }),
          ),
          ...[
            r.cap === null ? 'none' : num(r.cap) + ' ' + unit(r.kind),
            num(r.clients),
            num(r.wants),
            num(r.lease),
            num(r.admittedPerSec),
            num(r.refusedPerSec),
          ].map((text, i) => el('td', { 'data-label': labels[i + 1], text })),
        ),
      )
      panel.append(stackTable(labels, rows))
    }
    out.push(head, panel)
  }
  main.replaceChildren(...out)
}

/** Each keyed family: its holders, hot keys and the hottest of them (/v1/families). */
async function renderFamilies(main) {
  const { families } = await json('/v1/families?top=20')
  state.families = families
  dropCharts()
  const out = [el('h1', { text: 'Keyed families' })]
  if (families.length === 0)
    out.push(el('p', { class: 'muted', text: 'No process holds a keyed family now.' }))
  for (const f of families) {
    const quota = f.kind === 'quota'
    out.push(
      el(
        'h2',
        {},
        f.id + ' ',
        el('span', {
          class: 'muted',
          text:
            num(f.keyCapacity) +
            ' ' +
            unit(f.kind) +
            (quota ? ' a key a window · ' : ' a key · ') +
            f.holders +
            ' holder' +
            (f.holders === 1 ? '' : 's') +
            ' · ' +
            num(f.hotKeys) +
            ' of ' +
            num(f.maxHotKeys) +
            ' keys leased on their own',
        }),
      ),
    )
    // Every key's traffic together, as the processes report it, and a quota's window.
    const figures = [
      el('span', { 'data-figure': 'admitted', text: num(f.admittedPerSec) + '/s admitted' }),
      ' · ',
      el('span', { 'data-figure': 'refused', text: num(f.refusedPerSec) + '/s refused' }),
    ]
    if (f.window)
      figures.push(
        ' · ',
        el('span', {
          'data-figure': 'window-ends',
          text: 'window ends in ' + duration(f.window.endsInMs),
        }),
      )
    out.push(el('p', { class: 'muted', 'data-family-figures': f.id }, ...figures))
    const panel = el('div', { class: 'panel table-wrap', 'data-family': f.id })
    if (f.keys.length === 0)
      panel.append(
        el('p', {
          class: 'muted',
          text: 'Every key is within its holders’ default shares: none is leased on its own.',
        }),
      )
    else {
      const labels = quota
        ? ['key', 'budget', 'used', 'leased', 'demand', 'holders']
        : ['key', 'capacity', 'leased', 'demand', 'holders']
      const rows = f.keys.map((k) =>
        el(
          'tr',
          { 'data-key': k.key },
          ...[
            k.key,
            num(k.capacity) + ' ' + unit(f.kind),
            ...(quota ? [num(k.used ?? 0)] : []),
            num(k.committed),
            num(k.demand),
            num(k.clients),
          ].map((text, i) =>
            el('td', { 'data-label': labels[i], ...(i === 0 ? { class: 'name' } : {}), text }),
          ),
        ),
      )
      panel.append(stackTable(labels, rows))
    }
    out.push(panel)
  }
  main.replaceChildren(...out)
}

// ---------- shell ----------

function roleLine(ready) {
  const line = document.getElementById('role')
  if (ready.role === 'leader') {
    const parts = ['leader']
    // Names only while reads are open; behind a token, /readyz says how many.
    const learning = ready.learning ?? []
    const count = ready.learningCount ?? learning.length
    if (count > 0)
      parts.push(
        'learning: ' + (learning.length > 0 ? learning.join(', ') : count + ' resource(s)'),
      )
    // How it started is history; whether it learns now is the line above.
    if (ready.ledger && ready.ledger.kind !== 'none')
      parts.push(
        ready.ledger.kind + ' ledger' + (ready.ledger.started === 'restored' ? ' (resumed)' : ''),
      )
    line.replaceChildren(parts.join(' · '))
  } else if (ready.role === 'follower') {
    const leader = ready.leader
    if (leader) {
      const href = leader.replace(/^ws/, 'http').replace(/\/v1\/connect$/, '') + '/dashboard/'
      line.replaceChildren(
        'follower → leader ',
        el('a', { href, text: leader.replace(/^wss?:\/\//, '').replace(/\/v1\/connect$/, '') }),
      )
    } else line.replaceChildren('follower; the leader is not known yet')
  } else line.replaceChildren(String(ready.role))
  line.dataset.role = ready.role
}

function parseRoute() {
  const path = location.pathname
  const prefix = '/dashboard/resources/'
  if (path.startsWith(prefix))
    return { view: 'resource', id: decodeURIComponent(path.slice(prefix.length)) }
  if (path === '/dashboard/tenants') return { view: 'tenants' }
  if (path === '/dashboard/families') return { view: 'families' }
  return { view: 'overview' }
}

function showError(text) {
  const box = document.getElementById('error')
  box.hidden = text === ''
  box.textContent = text
}

async function refresh() {
  if (state.busy) return
  state.busy = true
  try {
    const ready = await json('/readyz').catch((error) => {
      // 503 is a follower or a coordinator starting: its body still says which.
      if (error.status === 503) return get('/readyz').then((r) => r.json())
      throw error
    })
    roleLine(ready)
    if (state.tenants === null && state.tick % 10 === 0) {
      const t = await get('/v1/tenants')
      if (t.ok) state.tenants = (await t.json()).tenants
    }
    document.getElementById('nav-tenants').hidden = !(state.tenants && state.tenants.length > 0)
    if (state.tick % 5 === 0) {
      const f = await get('/v1/families?top=0')
      if (f.ok) state.families = (await f.json()).families
    }
    document.getElementById('nav-families').hidden = !(state.families && state.families.length > 0)
    const main = document.getElementById('main')
    const route = state.route
    document
      .getElementById('nav-resources')
      .classList.toggle('current', route.view !== 'tenants' && route.view !== 'families')
    document.getElementById('nav-tenants').classList.toggle('current', route.view === 'tenants')
    document.getElementById('nav-families').classList.toggle('current', route.view === 'families')
    if (route.view === 'resource') {
      document.title = route.id + ' · Sluice'
      await renderResource(main, route.id)
    } else if (route.view === 'tenants') {
      document.title = 'Tenants · Sluice'
      await renderTenants(main)
    } else if (route.view === 'families') {
      document.title = 'Keyed families · Sluice'
      await renderFamilies(main)
    } else {
      document.title = 'Sluice'
      await renderOverview(main)
    }
    document.getElementById('auth').hidden = true
    showError('')
    document.getElementById('footer').textContent =
      'updated ' + new Date().toLocaleTimeString() + ' · every ' + refreshMs / 1000 + ' s'
  } catch (error) {
    if (error instanceof AuthNeeded) {
      document.getElementById('auth').hidden = false
      showError('')
    } else showError('cannot reach the coordinator: ' + error.message)
  } finally {
    state.busy = false
    state.tick++
  }
}

function navigate(href) {
  history.pushState(null, '', href)
  onRoute()
}
function onRoute() {
  state.route = parseRoute()
  state.expanded.clear()
  dropCharts()
  document.getElementById('main').replaceChildren()
  void refresh()
}

document.addEventListener('click', (event) => {
  const a = event.target.closest('a[data-route]')
  if (
    a !== null &&
    event.button === 0 &&
    !event.metaKey &&
    !event.ctrlKey &&
    !event.shiftKey &&
    !event.altKey
  ) {
    event.preventDefault()
    if (a.pathname !== location.pathname) navigate(a.getAttribute('href'))
    return
  }
  const row = event.target.closest('#clients tbody tr[data-client]')
  if (row !== null) {
    const id = row.dataset.client
    if (state.expanded.has(id)) state.expanded.delete(id)
    else state.expanded.add(id)
    void refresh()
    return
  }
  const th = event.target.closest('th.sortable')
  if (th !== null) sortBy(th.dataset.key)
  const button = event.target.closest('button[data-range]')
  if (button !== null) {
    state.rangeS = Number(button.dataset.range)
    for (const b of document.querySelectorAll('button[data-range]'))
      b.setAttribute('aria-pressed', b === button ? 'true' : 'false')
    void refresh()
  }
})
document.addEventListener('keydown', (event) => {
  const th = event.target.closest?.('th.sortable')
  if (th && (event.key === 'Enter' || event.key === ' ')) {
    event.preventDefault()
    sortBy(th.dataset.key)
  }
})
function sortBy(key) {
  state.sort =
    state.sort.key === key
      ? { key, dir: -state.sort.dir }
      : { key, dir: key === 'name' || key === 'tenant' ? 1 : -1 }
  if (state.detail !== null)
    document.querySelector('.clients-slot')?.replaceChildren(clientTable(state.detail))
}
document.getElementById('auth').addEventListener('submit', (event) => {
  event.preventDefault()
  sessionStorage.setItem('sluice-token', document.getElementById('auth-token').value)
  document.getElementById('auth-token').value = ''
  state.tenants = null
  state.tick = 0
  void refresh()
})
window.addEventListener('popstate', onRoute)

state.route = parseRoute()
void refresh()
setInterval(() => void refresh(), refreshMs)
