import { createServer, type ServerResponse } from 'node:http'
import express from 'express'
import { rateLimit } from 'express-rate-limit'
import Fastify from 'fastify'
import fastifyRateLimitPeer from '@fastify/rate-limit'
import { createRateLimitMiddleware, fastifyRateLimit } from '../client/http/index.js'
import { TokenBucketLimiter } from '../shared/limiters/index.js'

/**
 * The server side of `npm run bench -- http`: a hello route on fastify,
 * Express or plain node:http, bare or behind a rate limiter set so that every
 * request is allowed (the allow path). argv[2] is `<server>-<limiter>`.
 */
const [server, limiter] = (process.argv[2] ?? 'fastify-none').split('-') as [string, string]
// A per-IP local limiter generous enough that every request is allowed.
const sluiceOptions = {
  limiter: () => new TokenBucketLimiter({ ratePerSec: 1e9, burst: 1e9 }),
  policy: { quota: 1e9, windowSec: 1 },
}
const hello = JSON.stringify({ hello: 'world' })
let port: number

if (server === 'fastify') {
  const app = Fastify({ logger: false })
  if (limiter === 'skip')
    await app.register(fastifyRateLimit, { ...sluiceOptions, skip: () => true })
  if (limiter === 'sluice') await app.register(fastifyRateLimit, sluiceOptions)
  if (limiter === 'full')
    await app.register(fastifyRateLimit, { ...sluiceOptions, headers: 'ietf' as const })
  // @fastify/rate-limit as its README sets it up, in memory.
  if (limiter === 'peer') await app.register(fastifyRateLimitPeer, { max: 1e9, timeWindow: 60_000 })
  // The parts of a limiter's cost: an empty hook, one and two constant header fields (as Sluice's).
  if (limiter === 'hook') app.addHook('onRequest', (_req, _reply, done) => done())
  if (limiter === 'field')
    app.addHook('onRequest', (_req, reply, done) => {
      void reply.header('ratelimit', '"default";r=999999999;t=1')
      done()
    })
  if (limiter === 'fields')
    app.addHook('onRequest', (_req, reply, done) => {
      void reply.header('ratelimit-policy', '"default";q=1000000000;w=1')
      void reply.header('ratelimit', '"default";r=999999999;t=1')
      done()
    })
  app.get('/hello', async () => ({ hello: 'world' }))
  await app.listen({ host: '127.0.0.1', port: 0 })
  port = (app.server.address() as { port: number }).port
  process.once('SIGTERM', () => void app.close().then(() => process.exit(0)))
} else if (server === 'express') {
  const app = express()
  if (limiter === 'sluice') {
    const limit = createRateLimitMiddleware(sluiceOptions)
    app.use((req, res, next) => void limit(req, res, next))
  }
  // express-rate-limit with its defaults, in memory.
  if (limiter === 'peer') app.use(rateLimit({ windowMs: 60_000, limit: 1e9 }))
  app.get('/hello', (_req, res) => {
    res.json({ hello: 'world' })
  })
  const s = app.listen(0, '127.0.0.1')
  await new Promise((resolve) => s.once('listening', resolve))
  port = (s.address() as { port: number }).port
  process.once('SIGTERM', () => s.close(() => process.exit(0)))
} else {
  const limit = limiter === 'sluice' ? createRateLimitMiddleware(sluiceOptions) : undefined
  const reply = (res: ServerResponse): void => {
    res.setHeader('content-type', 'application/json; charset=utf-8')
    res.end(hello)
  }
  const s = createServer((req, res) => {
    if (limit === undefined) return reply(res)
    void limit(req, res).then((ok) => {
      if (ok) reply(res)
    })
  })
  await new Promise<void>((resolve) => s.listen(0, '127.0.0.1', resolve))
  port = (s.address() as { port: number }).port
  process.once('SIGTERM', () => s.close(() => process.exit(0)))
}
// The bench asks for the server's own CPU time (µs, from getrusage: finer than /proc's 10 ms ticks).
process.on('message', () => process.send?.(process.cpuUsage()))
console.log(`port ${port}`)
