import Fastify from 'fastify'
import { fastifyRateLimit } from '../client/http/index.js'
import { TokenBucketLimiter } from '../client/limiters/index.js'

// The server side of `npm run bench -- http`: a hello route, with or without the plugin (argv[2] === 'plugin').
const variant = process.argv[2]
const app = Fastify({ logger: false })
if (variant === 'skip') {
  // The plugin's hook with every request skipped: its fixed cost, without limiter or headers.
  await app.register(fastifyRateLimit, {
    limiter: () => new TokenBucketLimiter({ ratePerSec: 1e9, burst: 1e9 }),
    policy: { quota: 1e9, windowSec: 1 },
    skip: () => true,
  })
}
if (variant === 'plugin') {
  // A per-IP local limiter generous enough that every request is allowed: the allow path.
  await app.register(fastifyRateLimit, {
    limiter: () => new TokenBucketLimiter({ ratePerSec: 1e9, burst: 1e9 }),
    policy: { quota: 1e9, windowSec: 1 },
  })
}
app.get('/hello', async () => ({ hello: 'world' }))
await app.listen({ host: '127.0.0.1', port: 0 })
const address = app.server.address() as { port: number }
console.log(`port ${address.port}`)
process.once('SIGTERM', () => void app.close().then(() => process.exit(0)))
