import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { chromium, type Browser } from 'playwright-core'
import { Cluster } from '../../helpers/cluster.js'
import { simpleConfig } from '../../helpers/coordinator.js'

// The dashboard in a real Chromium (Debian's, which .ci/run installs) against a real
// coordinator. The coordinator runs on a manual clock; the page polls on the browser's own.

const chromiumPath = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium'
let browser: Browser

beforeAll(async () => {
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

describe('dashboard', () => {
  it('shows each resource live, and its clients when clicked, with no script errors', async () => {
    const cluster = new Cluster()
    await cluster.start(simpleConfig({ capacity: 300 }))
    const page = await browser.newPage()
    const problems: string[] = []
    page.on('pageerror', (error) => problems.push(error.message))
    page.on('console', (msg) => {
      if (msg.type() === 'error') problems.push(msg.text())
    })
    try {
      const first = await cluster.client('alpha')
      first.resource('api', { wants: 100 })
      for (let i = 0; i < 5; i++) await cluster.step(100)

      const res = await page.goto(`${cluster.server.url}/dashboard`)
      expect(res?.headers()['content-security-policy']).toContain("script-src 'self'")
      await expect.poll(() => page.locator('#role').textContent()).toBe('leader')
      const row = page.locator('tr[data-id="api"] td')
      await expect
        .poll(() => row.allTextContents())
        .toEqual(['api', 'rate', '300', '100', '200', '100', '1', '', 'leasing'])

      // A second client joins: the page picks it up on its next poll.
      const second = await cluster.client('beta')
      second.resource('api', { wants: 500 })
      for (let i = 0; i < 5; i++) await cluster.step(100)
      await expect.poll(() => row.nth(6).textContent(), { timeout: 5000 }).toBe('2')

      await page.locator('tr[data-id="api"]').click()
      await expect.poll(() => page.locator('#detail-title').textContent()).toBe('clients of api')
      const clients = page.locator('#clients tbody tr td:first-child')
      await expect.poll(() => clients.allTextContents()).toEqual(['alpha', 'beta'])
      expect(problems).toEqual([])
    } finally {
      await page.close()
      await cluster.close()
    }
  })
})
