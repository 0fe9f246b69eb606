import { readFileSync } from 'node:fs'
import { createRequire } from 'node:module'
import type { FastifyInstance, FastifyReply } from 'fastify'

/**
 * The live dashboard: one page (the same HTML for every dashboard URL, so a
 * drill-down such as `/dashboard/resources/<id>` opens directly and the
 * script routes on the path), our own script and style, and uPlot for the
 * charts, all served from the package: nothing from another origin, no
 * inline script. The page reads the JSON status API, as `sluice status` does.
 */

/** Where the page's files are: next to this module (the build copies them into dist). */
const assetsUrl = new URL('./assets/', import.meta.url)
const require = createRequire(import.meta.url)

interface Asset {
  readonly type: string
  readonly body: Buffer
}

function loadAssets(): Map<string, Asset> {
  const own = (name: string, type: string): [string, Asset] => [
    name,
    { type, body: readFileSync(new URL(name, assetsUrl)) },
  ]
  const uplot = (file: string, name: string, type: string): [string, Asset] => [
    name,
    { type, body: readFileSync(require.resolve(`uplot/dist/${file}`)) },
  ]
  return new Map([
    own('index.html', 'text/html; charset=utf-8'),
    own('app.js', 'text/javascript; charset=utf-8'),
    own('app.css', 'text/css; charset=utf-8'),
    uplot('uPlot.iife.min.js', 'uplot.js', 'text/javascript; charset=utf-8'),
    uplot('uPlot.min.css', 'uplot.css', 'text/css; charset=utf-8'),
  ])
}

let cached: Map<string, Asset> | undefined

/**
 * Scripts and styles from this origin only. uPlot sizes its elements through
 * the CSSOM, which `style-src 'self'` allows; nothing else is inline.
 */
export const dashboardCsp =
  "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

export function registerDashboard(app: FastifyInstance): void {
  cached ??= loadAssets()
  const assets = cached
  const page = assets.get('index.html')!
  const sendPage = async (_req: unknown, reply: FastifyReply) =>
    reply.type(page.type).header('content-security-policy', dashboardCsp).send(page.body)
  // Browsers ask for it whatever the page says; an empty answer keeps their consoles clean.
  app.get('/favicon.ico', async (_req, reply) =>
    reply.code(204).header('cache-control', 'max-age=86400').send(),
  )
  app.get('/dashboard', sendPage)
  app.get('/dashboard/', sendPage)
  app.get('/dashboard/tenants', sendPage)
  app.get('/dashboard/families', sendPage)
  // Resource ids may hold `/`: the rest of the path is the id.
  app.get('/dashboard/resources/*', sendPage)
  app.get('/dashboard/assets/:name', async (req, reply) => {
    const { name } = req.params as { name: string }
    const asset = name === 'index.html' ? undefined : assets.get(name)
    if (asset === undefined) return reply.callNotFound()
    return reply
      .type(asset.type)
      .header('cache-control', 'no-cache')
      .header('x-content-type-options', 'nosniff')
      .send(asset.body)
  })
}
