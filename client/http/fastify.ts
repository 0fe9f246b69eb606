import type { FastifyPluginAsync, FastifyRequest } from 'fastify'
import { RateLimitCore, type Decision, type RateLimitOptions, type RequestInfo } from './core.js'

declare module 'fastify' {
  interface FastifyContextConfig {
    /** Per-route rate limit: `false` turns it off, an object replaces the plugin's options for this route. */
    rateLimit?: false | RateLimitOptions
  }
}

function info(req: FastifyRequest): RequestInfo {
  return { ip: req.ip, headers: req.headers, route: req.routeOptions.url ?? req.url.split('?')[0]! }
}

/**
 * Limits incoming requests through a local limiter or a coordinated
 * resource. Register it once; routes override with `config.rateLimit`.
 * Every limited response carries RateLimit-Policy and RateLimit; a refused
 * one is a 429 with Retry-After and a JSON body with a stable code.
 */
const plugin: FastifyPluginAsync<RateLimitOptions> = async (app, options) => {
  const global = new RateLimitCore(options)
  // One core per route config object, made on first use.
  const perRoute = new WeakMap<RateLimitOptions, RateLimitCore>()
  // A callback hook, not an async one: the allow path then costs no promise.
  app.addHook('onRequest', (req, reply, done) => {
    const config = req.routeOptions.config.rateLimit
    if (config === false) return done()
    let core = global
    if (config !== undefined) {
      core = perRoute.get(config) ?? new RateLimitCore(config)
      perRoute.set(config, core)
    }
    const apply = (decision: Decision | undefined): void => {
      if (decision === undefined) return done()
      void reply.headers(decision.headers)
      if (decision.allowed) return done()
      void reply.code(429).send(decision.body)
    }
    const decision = core.decide(info(req))
    if (decision instanceof Promise) decision.then(apply, done)
    else apply(decision)
  })
}
// Applies to the whole app, not only to routes registered inside the plugin (what fastify-plugin does).
;(plugin as unknown as Record<symbol, boolean>)[Symbol.for('skip-override')] = true

export const fastifyRateLimit = plugin
