/**
 * The live dashboard: one HTML page and one script, no external assets. The
 * page polls the JSON status API every second (`/readyz`, `/v1/resources`,
 * and `/v1/resources/<id>` for the resource selected), so it shows exactly
 * what `sluice status` shows. Served with a CSP that allows only our own script.
 */

export const dashboardHtml = `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>Sluice coordinator</title>
<meta name="viewport" content="width=device-width, initial-scale=1">
<style>
  body { font: 14px/1.4 system-ui, sans-serif; margin: 1.5rem; color: #222; }
  h1 { font-size: 1.3rem; margin: 0 0 .3rem; }
  #role { margin-bottom: 1rem; color: #555; }
  table { border-collapse: collapse; width: 100%; margin-bottom: 1.5rem; }
  th, td { text-align: right; padding: .3rem .6rem; border-bottom: 1px solid #e5e5e5; white-space: nowrap; }
  th:first-child, td:first-child { text-align: left; }
  tr.resource { cursor: pointer; }
  tr.resource:hover, tr.selected { background: #f3f7fc; }
  .bar { position: relative; width: 160px; height: 10px; background: #eee; display: inline-block; }
  .bar span { position: absolute; left: 0; top: 0; bottom: 0; }
  .committed { background: #1f77b4; }
  .demand { background: none; border-right: 2px solid #d62728; }
  .learning { color: #b36b00; }
  #error { color: #b00; }
</style>
</head>
<body>
<h1>Sluice coordinator</h1>
<div id="role">connecting…</div>
<div id="error"></div>
<table id="resources">
  <thead><tr><th>resource</th><th>kind</th><th>capacity</th><th>committed</th><th>free</th><th>demand</th><th>clients</th><th>use</th><th>state</th></tr></thead>
  <tbody></tbody>
</table>
<h2 id="detail-title" hidden></h2>
<table id="clients" hidden>
  <thead><tr><th>client</th><th>connected</th><th>tenant</th><th>wants</th><th>estimated demand</th><th>target</th><th>lease</th><th>weight</th><th>priority</th><th>lease age</th></tr></thead>
  <tbody></tbody>
</table>
<script src="dashboard.js"></script>
</body>
</html>
`

export const dashboardJs = `'use strict'
let selected = null
const fmt = (x) => (typeof x !== 'number' ? String(x) : Math.abs(x) >= 100 ? x.toFixed(0) : x.toFixed(2))
function cell(row, text) {
  const td = document.createElement('td')
  td.textContent = text
  row.appendChild(td)
  return td
}
function bar(row, r) {
  const td = cell(row, '')
  const outer = document.createElement('span')
  outer.className = 'bar'
  const cap = r.capacity > 0 ? r.capacity : 1
  const committed = document.createElement('span')
  committed.className = 'committed'
  committed.style.width = Math.min(100, (100 * r.committed) / cap) + '%'
  const demand = document.createElement('span')
  demand.className = 'demand'
  demand.style.width = Math.min(100, (100 * r.demand) / cap) + '%'
  outer.append(committed, demand)
  td.appendChild(outer)
}
// When reads need a token, the page asks for it once and keeps it for the tab's life.
function headers() {
  const token = sessionStorage.getItem('sluice-token')
  return token ? { authorization: 'Bearer ' + token } : {}
}
async function get(path) {
  let res = await fetch(path, { cache: 'no-store', headers: headers() })
  if (res.status === 401) {
    const token = window.prompt('This coordinator needs a token to show its resources (read, admin or tenant token):')
    if (token) {
      sessionStorage.setItem('sluice-token', token)
      res = await fetch(path, { cache: 'no-store', headers: headers() })
    }
  }
  return res
}
async function json(path) {
  const res = await get(path)
  if (res.status === 401) throw new Error('a token is needed (reload the page to enter it)')
  return res.json()
}
async function refresh() {
  try {
    const ready = await json('readyz')
    document.getElementById('role').textContent =
      ready.role === 'leader'
        ? 'leader' + (ready.learning.length > 0 ? ', learning: ' + ready.learning.join(', ') : '')
        : 'follower; leader: ' + (ready.leader || 'not known yet')
    const { resources } = await json('v1/resources')
    const body = document.querySelector('#resources tbody')
    body.replaceChildren()
    for (const r of resources) {
      const row = document.createElement('tr')
      row.className = 'resource' + (r.id === selected ? ' selected' : '')
      row.dataset.id = r.id
      for (const v of [r.id, r.kind, fmt(r.capacity), fmt(r.committed), fmt(r.free), fmt(r.demand), r.clients]) cell(row, v)
      bar(row, r)
      const state = cell(row, r.learning ? 'learning' : 'leasing')
      if (r.learning) state.className = 'learning'
      row.addEventListener('click', () => {
        selected = r.id
        void refresh()
      })
      body.appendChild(row)
    }
    await refreshDetail()
    document.getElementById('error').textContent = ''
  } catch (error) {
    document.getElementById('error').textContent = 'cannot reach the coordinator: ' + error.message
  }
}
async function refreshDetail() {
  const title = document.getElementById('detail-title')
  const table = document.getElementById('clients')
  if (selected === null) return
  const res = await get('v1/resources/' + encodeURIComponent(selected))
  if (!res.ok) {
    title.hidden = table.hidden = true
    return
  }
  const detail = await res.json()
  title.hidden = table.hidden = false
  title.textContent = 'clients of ' + detail.id
  const body = table.querySelector('tbody')
  body.replaceChildren()
  for (const c of detail.clientDetails) {
    const row = document.createElement('tr')
    for (const v of [c.id, c.connected ? 'yes' : 'no', c.tenant ?? '—', fmt(c.wants), fmt(c.estimatedDemand), fmt(c.target), fmt(c.lease), fmt(c.weight), c.priority, c.leaseAgeMs === null ? '—' : c.leaseAgeMs + ' ms']) cell(row, v)
    body.appendChild(row)
  }
}
void refresh()
setInterval(refresh, 1000)
`
