/**
 * A small fastify API whose /search route is limited cluster-wide through
 * the coordinator, and every route per IP locally. With `npm start` running:
 *
 *   npm run example:gateway
 *   curl -i localhost:8080/search
 *
 * Run two gateways (PORT=8081 for the second) and they share /search's
 * cluster-wide rate between them.
 */
import Fastify from 'fastify'
import { createClient } from '../client/index.js'
import { fastifyRateLimit } from '../client/http/index.js'
import { TokenBucketLimiter } from '../client/limiters/index.js'

const port = Number(process.env.PORT ?? 8080)
const client = createClient({ url: process.env.SLUICE_URL ?? 'ws://127.0.0.1:7070/v1/connect' })
// `search` matches the example config's "*" template: 100 requests/s across every gateway.
const search = client.resource('search')

const app = Fastify({ logger: false })
// Every route: 20 requests/s per client IP, bursts of 40, in this process.
await app.register(fastifyRateLimit, {
  limiter: () => new TokenBucketLimiter({ ratePerSec: 20, burst: 40 }),
  policy: { name: 'per-ip', quota: 40, windowSec: 2 },
})
// /search: the cluster-wide resource instead, shaping up to 250 ms before refusing.
app.get(
  '/search',
  { config: { rateLimit: { resource: search, mode: 'shape', maxDelayMs: 250 } } },
  async (req) => ({
    query: (req.query as { q?: string }).q ?? '',
    results: [],
  }),
)
app.get('/health', { config: { rateLimit: false } }, async () => ({ ok: true }))

await app.listen({ host: '127.0.0.1', port })
console.log(`gateway on http://127.0.0.1:${port} (search leased from the coordinator)`)
const stop = async (): Promise<void> => {
  await app.close()
  await client.close()
}
process.once('SIGINT', () => void stop())
process.once('SIGTERM', () => void stop())
