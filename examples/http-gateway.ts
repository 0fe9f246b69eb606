/**
 * A small fastify API whose /search route is limited cluster-wide through
 * the coordinator, and every route per IP locally. With `npm start` running:
 *
 *   npm run example:gateway
 *   curl -i localhost:8080/search
 *   for i in $(seq 15); do curl -s -o /dev/null -w '%{http_code} ' localhost:8080/search; done
 *
 * The loop shows ten 200s, then 429s: one IP's burst of 10 is spent.
 *
 * Run two gateways (PORT=8081 for the second) and they share /search's
 * cluster-wide rate between them.
 */
import Fastify from 'fastify'
import { createClient } from '../client/index.js'
import { fastifyRateLimit } from '../client/http/index.js'
import { TokenBucketLimiter } from '../shared/limiters/index.js'

const port = Number(process.env.PORT ?? 8080)
const client = createClient({ url: process.env.SLUICE_URL ?? 'ws://127.0.0.1:7070/v1/connect' })
// `search` matches the example config's "*" template: 100 requests/s across every gateway.
const search = client.resource('search')
client.on('error', (error) => console.warn(error.code, error.message))
await search.ready({ timeoutMs: 10_000 })

const app = Fastify({ logger: false })
// Every route: 5 requests/s per client IP (an IPv6 client per /64), bursts of 10, in this process.
await app.register(fastifyRateLimit, {
  limiter: () => new TokenBucketLimiter({ ratePerSec: 5, burst: 10 }),
  policy: { name: 'per-ip', quota: 10, windowSec: 2 },
  headers: 'both', // RateLimit and RateLimit-Policy, and X-RateLimit-* for older clients
})
// /search: the per-IP limit and, on top, the cluster-wide resource shared by every gateway.
app.get('/search', { config: { rateLimit: { resource: search } } }, async (req) => ({
  query: (req.query as { q?: string }).q ?? '',
  results: [],
}))
app.get('/health', { config: { rateLimit: false } }, async () => ({ ok: true }))

await app.listen({ host: '127.0.0.1', port })
console.log(`gateway on http://127.0.0.1:${port} (search leased from the coordinator)`)
const stop = async (): Promise<void> => {
  await app.close()
  await client.close()
}
process.once('SIGINT', () => void stop())
process.once('SIGTERM', () => void stop())
