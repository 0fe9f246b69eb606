import { mkdirSync } from 'node:fs'
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest'
import { chromium, type Browser, type Page } from 'playwright-core'
import type { ConfigInput } from '../../../server/config/index.js'
import { Cluster, Load } from '../../helpers/cluster.js'
import { apiAndDbConfig } from '../../helpers/coordinator.js'

// The dashboard in a real Chromium (Debian's, which .ci/run installs) against a real
// coordinator with real clients over WebSocket. The coordinator and clients run on a manual
// clock (the test moves it, and with it the load); the page polls on the browser's own clock.
// Screenshots go to test-results/dashboard/ for a person to look at.

const chromiumPath = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium'
const shots = 'test-results/dashboard'
let browser: Browser
const open: Array<{ close(): Promise<void> }> = []

beforeAll(async () => {
  mkdirSync(shots, { recursive: true })
  browser = await chromium.launch({
    executablePath: chromiumPath,
    args: [
      '--headless',
      '--no-sandbox',
      '--disable-gpu',
      '--disable-quic',
      '--no-first-run',
      '--disable-background-networking',
      '--disable-component-update',
      '--disable-sync',
    ],
  })
})

afterAll(async () => {
  await browser?.close()
})

afterEach(async () => {
  for (const o of open.splice(0).reverse()) await o.close()
})

const config = apiAndDbConfig()

/** A page that fails the test on any script error or CSP violation. */
async function newPage(width = 1280, height = 900): Promise<{ page: Page; problems: string[] }> {
  const page = await browser.newPage({ viewport: { width, height } })
  open.push(page)
  const problems: string[] = []
  page.on('pageerror', (error) => problems.push(error.message))
  page.on('console', (msg) => {
    if (msg.type() === 'error') problems.push(`${msg.text()} (${msg.location().url})`)
  })
  return { page, problems }
}

/** Runs the loads for `seconds` of the cluster's clock, 100 ms at a time. */
async function run(cluster: Cluster, loads: Load[], seconds: number): Promise<void> {
  for (let i = 0; i < seconds * 10; i++) {
    for (const load of loads) load.tick(100)
    await cluster.step(100)
  }
}

async function started(cfg: ConfigInput = config): Promise<Cluster> {
  const cluster = new Cluster()
  await cluster.start(cfg)
  open.push(cluster)
  return cluster
}

const caption = (page: Page, id: string) =>
  page.locator(`section.card[data-id="${id}"] .chart-caption`)

/** The page is no wider than its viewport. */
async function overflow(page: Page): Promise<number> {
  return Number(await page.evaluate('document.documentElement.scrollWidth - window.innerWidth'))
}

describe('dashboard', () => {
  it('charts each resource, and its series follow the load: refusals appear when demand passes capacity', async () => {
    const cluster = await started()
    const alpha = await cluster.client('alpha', { name: 'checkout-1' })
    const beta = await cluster.client('beta', { name: 'search-7' })
    const a = new Load(alpha.resource('api', { wants: 100 }), 100)
    const b = new Load(beta.resource('api', { wants: 100 }), 100)
    const db = alpha.resource('db', { wants: 4 })
    // Leases first (a bucket fills from empty), then the load: nothing is refused.
    await run(cluster, [], 2)
    await run(cluster, [a, b], 15)
    for (let i = 0; i < 3; i++) db.tryAcquire()
    await run(cluster, [a, b], 2)

    const { page, problems } = await newPage()
    const res = await page.goto(`${cluster.server.url}/dashboard`)
    expect(res?.status()).toBe(200)
    expect(res?.headers()['content-security-policy']).toContain("script-src 'self'")
    expect(res?.headers()['content-security-policy']).not.toContain('unsafe-inline')
    await expect.poll(() => page.locator('#role').getAttribute('data-role')).toBe('leader')

    // Below capacity: 200 of 300 tokens/s admitted, nothing refused.
    const api = page.locator('section.card[data-id="api"]')
    await expect.poll(() => caption(page, 'api').getAttribute('data-refused')).toBe('0')
    // Rates are decayed with a 5 s time constant: 17 s after the load began they read 95–100%.
    const admitted = Number(await caption(page, 'api').getAttribute('data-admitted'))
    expect(admitted).toBeGreaterThan(190)
    expect(admitted).toBeLessThanOrEqual(201)
    await expect.poll(() => api.locator('canvas').count()).toBeGreaterThan(0)
    expect(await api.locator('[data-figure="used"] .value').first().textContent()).toMatch(/^6\d%/)
    const points = Number(await api.locator('.chart').getAttribute('data-points'))
    expect(points).toBeGreaterThanOrEqual(8)
    // The concurrency resource shows slots in flight.
    await expect.poll(() => caption(page, 'db').textContent()).toMatch(/in flight 3 slots/)
    await page.screenshot({ path: `${shots}/overview-quiet.png`, fullPage: true })

    // beta's load jumps to 500/s: the coordinator cannot give it that, its limiter refuses.
    b.ratePerSec = 500
    beta.resource('api').setWants(500)
    await run(cluster, [a, b], 8)
    await expect
      .poll(async () => Number(await caption(page, 'api').getAttribute('data-refused')))
      .toBeGreaterThan(100)
    await expect.poll(() => api.getAttribute('class')).toContain('refusing')
    expect(Number(await api.locator('.chart').getAttribute('data-points'))).toBeGreaterThan(points)
    expect(await caption(page, 'api').textContent()).toMatch(/refusing for \d/)
    await page.screenshot({ path: `${shots}/overview-refusing.png`, fullPage: true })
    expect(problems).toEqual([])
  })

  it('opens a drill-down URL directly, lists clients by name, sorts them, and the back button works', async () => {
    const cluster = await started()
    const alpha = await cluster.client('alpha', { name: 'checkout-1' })
    const beta = await cluster.client('beta', { name: 'search-7' })
    const a = new Load(alpha.resource('api', { wants: 100 }), 100)
    const b = new Load(beta.resource('api', { wants: 500 }), 500)
    await run(cluster, [a, b], 12)

    const { page, problems } = await newPage()
    expect((await page.goto(`${cluster.server.url}/dashboard/resources/api`))?.status()).toBe(200)
    await expect.poll(() => page.locator('h1 .title').textContent()).toBe('api')
    const names = page.locator('#clients tbody td.name')
    await expect.poll(() => names.count()).toBe(2)
    // Sorted by name first; by refused/s (most first) after one click on its header.
    expect(await page.locator('#clients tbody tr').first().getAttribute('data-client')).toBe(
      'alpha',
    )
    await page.locator('#clients th[data-key="refused"]').click()
    expect(await page.locator('#clients th[data-key="refused"]').getAttribute('aria-sort')).toBe(
      'descending',
    )
    expect(await page.locator('#clients tbody tr').first().getAttribute('data-client')).toBe('beta')
    expect(await page.locator('#clients tbody tr').first().getAttribute('class')).toBe('refusing')
    await expect.poll(() => page.locator('.resource-view .chart canvas').count()).toBeGreaterThan(0)
    // A click on a client opens its own chart: beta's refusals over the last minutes.
    await page.locator('#clients tbody tr[data-client="beta"]').click()
    const betaChart = page.locator('.client-chart[data-client="beta"]')
    await expect.poll(() => betaChart.locator('canvas').count()).toBeGreaterThan(0)
    await expect
      .poll(async () =>
        Number(await betaChart.locator('.chart-caption').getAttribute('data-refused')),
      )
      .toBeGreaterThan(100)
    await page.screenshot({ path: `${shots}/resource.png`, fullPage: true })
    await page.locator('#clients tbody tr[data-client="beta"]').click()
    await expect.poll(() => betaChart.count()).toBe(0)

    // Overview → drill-down by a click (pushState), then back.
    await page.goto(`${cluster.server.url}/dashboard/`)
    await page.locator('section.card[data-id="api"] .card-head a').click()
    await expect.poll(() => page.locator('h1 .title').textContent()).toBe('api')
    expect(new URL(page.url()).pathname).toBe('/dashboard/resources/api')
    await page.goBack()
    expect(new URL(page.url()).pathname).toBe('/dashboard/')
    await expect.poll(() => page.locator('section.card[data-id="api"]').count()).toBe(1)

    // An id no client uses says so; the page does not break.
    await page.goto(`${cluster.server.url}/dashboard/resources/${encodeURIComponent('no/such')}`)
    await expect
      .poll(() => page.locator('main').textContent())
      .toContain('No client uses this resource')
    expect(problems).toEqual([expect.stringContaining('404 (Not Found) (http://127.0.0.1')])
    expect(problems[0]).toContain('/v1/resources/no%2Fsuch')
  })

  it('has no horizontal overflow at 800 px and at 390 px (phone), overview and drill-down', async () => {
    const cluster = await started()
    const long = await cluster.client('a-client-with-a-rather-long-identifier-0123456789', {
      name: 'payments-gateway-eu-west-1-canary:48211',
    })
    const other = await cluster.client('beta', { name: 'search-7' })
    const a = new Load(long.resource('api', { wants: 400 }), 400)
    const b = new Load(other.resource('api', { wants: 100 }), 100)
    long.resource('db', { wants: 2 }).tryAcquire()
    await run(cluster, [a, b], 5)

    for (const [width, height] of [
      [800, 900],
      [390, 844],
    ] as const) {
      const { page, problems } = await newPage(width, height)
      await page.goto(`${cluster.server.url}/dashboard/`)
      await expect.poll(() => page.locator('section.card canvas').count()).toBe(2)
      expect(await overflow(page)).toBeLessThanOrEqual(0)
      await page.screenshot({ path: `${shots}/overview-${width}.png`, fullPage: true })

      await page.goto(`${cluster.server.url}/dashboard/resources/api`)
      await expect.poll(() => page.locator('#clients tbody tr').count()).toBe(2)
      await expect.poll(() => page.locator('.resource-view canvas').count()).toBeGreaterThan(0)
      expect(await overflow(page)).toBeLessThanOrEqual(0)
      // The client table fits too (it does not scroll sideways inside its panel).
      const table = await page
        .locator('.clients-slot')
        .evaluate((e) => e.scrollWidth - e.clientWidth)
      await page.screenshot({ path: `${shots}/resource-${width}.png`, fullPage: true })
      expect(table).toBeLessThanOrEqual(0)
      await page.screenshot({ path: `${shots}/resource-${width}.png`, fullPage: true })
      expect(problems).toEqual([])
    }
  })

  it('asks for the read token when reads need one, then shows tenants and their shares', async () => {
    const cluster = await started({
      ...config,
      server: { ...config.server, readToken: 'read-token-123' },
      tenants: {
        shop: { token: 'shop-token-123', weight: 2, caps: { api: 120 } },
        search: { token: 'search-token-123' },
      },
    })
    const shop = await cluster.client('shop-1', { token: 'shop-token-123', name: 'shop-web' })
    const load = new Load(shop.resource('api', { wants: 200 }), 200)
    await run(cluster, [load], 4)

    const { page, problems } = await newPage()
    await page.goto(`${cluster.server.url}/dashboard/`)
    await expect.poll(() => page.locator('#auth').isVisible()).toBe(true)
    await page.locator('#auth-token').fill('read-token-123')
    await page.locator('#auth button').click()
    await expect.poll(() => page.locator('section.card[data-id="api"]').count()).toBe(1)
    await expect.poll(() => page.locator('#nav-tenants').isVisible()).toBe(true)
    await page.locator('#nav-tenants').click()
    expect(new URL(page.url()).pathname).toBe('/dashboard/tenants')
    const shopPanel = page.locator('[data-tenant="shop"]')
    await expect
      .poll(() => shopPanel.locator('tbody td').allTextContents())
      .toEqual([
        'api',
        '120 tokens/s',
        '1',
        '200',
        '120',
        expect.stringMatching(/^\d/),
        expect.stringMatching(/^\d/),
      ])
    expect(await page.locator('[data-tenant="search"]').textContent()).toContain(
      'No client of this tenant',
    )
    await page.screenshot({ path: `${shots}/tenants.png`, fullPage: true })
    // 401s for the first load are expected console noise; nothing else may fail.
    expect(problems.filter((p) => !p.includes('401'))).toEqual([])
  })
  it('draws capacity over committed, a gap as a gap, a stray refusal as no alarm, and the header as it is now', async () => {
    const cluster = await started()
    const alpha = await cluster.client('alpha', { name: 'checkout-1' })
    const beta = await cluster.client('beta', { name: 'search-7' })
    // Both ask for more than all of it between them: fully leased, committed = capacity.
    const a = new Load(alpha.resource('api', { wants: 250 }), 100)
    const b = new Load(beta.resource('api', { wants: 250 }), 100)
    await run(cluster, [], 2) // the leases first: nothing refused for want of one
    await run(cluster, [a, b], 6)
    // A stray refusal now and then (beta drains its bucket at once, then one call is refused,
    // every 2 s: 0.5/s, well under 1% of what is asked): no alarm.
    const beApi = beta.resource('api')
    for (let i = 0; i < 60; i++) {
      a.tick(100)
      b.tick(100)
      if (i % 20 === 0) while (beApi.tryAcquire());
      await cluster.step(100)
    }
    const { page, problems } = await newPage()
    await page.goto(`${cluster.server.url}/dashboard`)
    const api = page.locator('section.card[data-id="api"]')
    await expect.poll(() => api.locator('canvas').count()).toBeGreaterThan(0)
    // Capacity is the last series drawn, so it shows over committed at the same height.
    await expect
      .poll(() => api.locator('.chart').getAttribute('data-series'))
      .toBe('committed,demand,admitted,refused,capacity')
    expect(await api.getAttribute('class')).not.toContain('refusing')
    expect(await api.locator('.badge.refusing').count()).toBe(0)
    // Nobody learns: the header says leader, and nothing about learning.
    await expect.poll(() => page.locator('#role').textContent()).toMatch(/^leader/)
    expect(await page.locator('#role').textContent()).not.toContain('learning')

    // Every client goes; the resource leaves the pool (no samples) until one comes back.
    await alpha.close()
    await beta.close()
    for (let i = 0; i < 30; i++) await cluster.step(1000)
    const gamma = await cluster.client('gamma')
    const g = new Load(gamma.resource('api', { wants: 100 }), 100)
    await run(cluster, [g], 5)
    await page.reload()
    await expect.poll(() => api.locator('canvas').count()).toBeGreaterThan(0)
    await expect
      .poll(async () => Number(await api.locator('.chart').getAttribute('data-gaps')))
      .toBeGreaterThanOrEqual(1)
    await page.screenshot({ path: `${shots}/gap.png`, fullPage: true })
    expect(problems).toEqual([])
  })

  it('says learning in the header while the coordinator learns, and stops saying so when it ends', async () => {
    const cluster = await started({
      server: { limits: { roundDebounceMs: 0 } },
      resources: [
        { match: 'api', kind: 'rate', capacity: 100, learningMs: 3000, unsafeLearning: true },
      ],
    })
    const alpha = await cluster.client('alpha')
    alpha.resource('api', { wants: 50 })
    await cluster.step(100)
    const { page, problems } = await newPage()
    await page.goto(`${cluster.server.url}/dashboard`)
    await expect.poll(() => page.locator('#role').textContent()).toContain('learning: api')
    for (let i = 0; i < 40; i++) await cluster.step(100)
    await expect.poll(() => page.locator('#role').textContent()).toMatch(/^leader/)
    await expect.poll(() => page.locator('#role').textContent()).not.toContain('learning')
    expect(problems).toEqual([])
  })

  it('shows a quota as what remains of its window’s budget and when the window ends', async () => {
    const cluster = await started({
      server: { limits: { roundDebounceMs: 0 } },
      resources: [
        {
          match: 'emails',
          kind: 'quota',
          capacity: 600,
          window: '1m',
          refreshMs: 200,
          graceMs: 200,
          learningMs: 0,
          unsafeLearning: true,
        },
      ],
    })
    const alpha = await cluster.client('alpha')
    const load = new Load(alpha.resource('emails', { kind: 'quota' }), 0)
    // The lease first; then 20/s for 5 s: 100 of 600 used (the first window ends 40 s in).
    await run(cluster, [load], 1)
    load.ratePerSec = 20
    await run(cluster, [load], 5)
    load.ratePerSec = 0
    await run(cluster, [load], 1)
    // What the first blocks' ramp refused aside, all of it.
    expect(load.admitted).toBeGreaterThan(90)
    expect(load.admitted).toBeLessThanOrEqual(100)
    const { page, problems } = await newPage()
    await page.goto(`${cluster.server.url}/dashboard`)
    const card = page.locator('section.card[data-id="emails"]')
    await expect
      .poll(() => card.locator('[data-figure="remaining"] .value').textContent())
      .toBe(`${600 - load.admitted}of 600`)
    expect(await card.locator('[data-figure="window-ends"] .value').textContent()).toBe('33 s')
    expect(await card.locator('[data-figure="used"] .value').first().textContent()).toBe(
      `${Math.round((load.admitted / 600) * 100)}%`,
    )
    await page.screenshot({ path: `${shots}/quota.png`, fullPage: true })
    expect(problems).toEqual([])
  })

  it('lists keyed families with their hottest keys: a key leased on its own, and what it used of its budget', async () => {
    const cluster = await started({
      server: { limits: { roundDebounceMs: 0 } },
      resources: [
        {
          match: 'user/*',
          keyed: true,
          kind: 'quota',
          capacity: 100,
          window: '1m',
          refreshMs: 200,
          graceMs: 200,
          learningMs: 0,
          unsafeLearning: true,
        },
      ],
    })
    const families = [
      (await cluster.client('alpha')).keyed('user'),
      (await cluster.client('beta')).keyed('user'),
    ]
    await run(cluster, [], 1)
    // alice is busy at alpha (30/s for 3 s: past its default share, so leased on its own); the
    // others ask once each, within their shares.
    let alice = 0
    for (let i = 0; i < 30; i++) {
      for (let j = 0; j < 3; j++) if (families[0]!.tryAcquire('alice')) alice++
      families[1]!.tryAcquire(`visitor-${i}`)
      await cluster.step(100)
    }
    await run(cluster, [], 1)
    expect(alice).toBeGreaterThan(60)
    const { page, problems } = await newPage()
    await page.goto(`${cluster.server.url}/dashboard/`)
    await expect.poll(() => page.locator('#nav-families').isVisible()).toBe(true)
    await page.locator('#nav-families').click()
    expect(new URL(page.url()).pathname).toBe('/dashboard/families')
    const row = page.locator('[data-family="user/*"] tr[data-key="alice"]')
    await expect.poll(() => row.count()).toBe(1)
    expect(await row.locator('td[data-label="used"]').textContent()).toBe(String(alice))
    expect(await row.locator('td[data-label="budget"]').textContent()).toContain('100')
    // Keys asked for within the default shares are not leased one by one: not listed.
    expect(await page.locator('[data-family="user/*"] tr[data-key^="visitor-"]').count()).toBe(0)
    expect(await page.locator('h2').first().textContent()).toContain('2 holders')
    // Every key's traffic together (reported by the processes), and when the window ends
    // (windows aligned to the epoch: the manual clock's first one ends 40 s in).
    const figures = page.locator('[data-family-figures="user/*"]')
    const admitted = Number(
      (await figures.locator('[data-figure="admitted"]').textContent())!.split('/')[0],
    )
    expect(admitted).toBeGreaterThan(0)
    expect(await figures.locator('[data-figure="refused"]').textContent()).toMatch(/\/s refused$/)
    const endsSec = Math.ceil((40_000 - cluster.clock.now()) / 1000)
    expect(await figures.locator('[data-figure="window-ends"]').textContent()).toBe(
      `window ends in ${endsSec} s`,
    )
    await page.screenshot({ path: `${shots}/families.png`, fullPage: true })
    expect(problems).toEqual([])
  })
})
