import type { FastifyPluginAsync, FastifyReply, FastifyRequest } from 'fastify'
import { RateLimitCore, type Decision } from './core.js'
import {
  checkRateLimitOptions,
  mergeRateLimitOptions,
  type RateLimitOptions,
  type RequestInfo,
} from './options.js'

declare module 'fastify' {
  interface FastifyContextConfig {
    /** Per-route rate limit: `false` turns it off; an object is merged over the plugin's options. */
    rateLimit?: false | RateLimitOptions
  }
}

function info(req: FastifyRequest, url: string | undefined): RequestInfo {
  return {
    ip: req.ip,
    method: req.method,
    headers: req.headers,
    route: url ?? req.url.split('?')[0]!,
  }
}

/** The decision a request was let through on, for the skip options after its response. */
const settling = Symbol('sluice.rateLimit.settling')
type Settling = { core: RateLimitCore; decision: Decision }

function send(reply: FastifyReply, decision: Decision): void {
  void reply.code(decision.statusCode)
  void reply.send(decision.body)
}

/**
 * Limits incoming requests through a local limiter per key, a coordinated
 * resource, or both. Register it before the routes: each route's
 * `config.rateLimit` is merged over the plugin's options and checked when
 * the route is declared (`false` turns it off). Every limited response
 * carries the header fields chosen (`headers`); a refused one gets the
 * status and body chosen (429 and a coded JSON body by default), with
 * Retry-After.
 */
const plugin: FastifyPluginAsync<RateLimitOptions> = async (app, options) => {
  const global = new RateLimitCore(options, 'fastifyRateLimit')
  // One core per route config object, made when the route is declared.
  const perRoute = new WeakMap<RateLimitOptions, RateLimitCore>()
  const coreFor = (config: RateLimitOptions, where: string): RateLimitCore => {
    let core = perRoute.get(config)
    if (core === undefined) {
      checkRateLimitOptions(config, where)
      core = new RateLimitCore(mergeRateLimitOptions(options, config), where)
      perRoute.set(config, core)
    }
    return core
  }
  app.addHook('onRoute', (route) => {
    const config = route.config?.rateLimit
    if (config !== undefined && config !== false)
      coreFor(config, `route ${String(route.method)} ${route.url}: config.rateLimit`)
  })
  // A callback hook, not an async one: the allow path then costs no promise and no closure.
  const apply = (
    req: FastifyRequest,
    reply: FastifyReply,
    done: (error?: Error) => void,
    core: RateLimitCore,
    decision: Decision | undefined,
  ): void => {
    if (decision === undefined) return done()
    void reply.headers(decision.headers)
    if (!decision.allowed) return send(reply, decision)
    if (core.settles) (req as unknown as Record<symbol, Settling>)[settling] = { core, decision }
    done()
  }
  app.addHook('onRequest', (req, reply, done) => {
    // routeOptions is made afresh on each access: read it once.
    const route = req.routeOptions
    const config = route.config.rateLimit
    if (config === false) return done()
    let core: RateLimitCore
    let decision: ReturnType<RateLimitCore['decide']>
    try {
      // A route declared before the plugin was registered is checked here, on its first request.
      core = config === undefined ? global : coreFor(config, `route ${route.url}: config.rateLimit`)
      decision = core.decide(info(req, route.url))
    } catch (error) {
      return done(error as Error)
    }
    if (decision instanceof Promise) decision.then((d) => apply(req, reply, done, core, d), done)
    else apply(req, reply, done, core, decision)
  })
  app.addHook('onResponse', (req, reply, done) => {
    const s = (req as unknown as Record<symbol, Settling | undefined>)[settling]
    if (s !== undefined) s.core.settle(s.decision, reply.statusCode)
    done()
  })
}
// Applies to the whole app, not only to routes registered inside the plugin (what fastify-plugin does).
;(plugin as unknown as Record<symbol, boolean>)[Symbol.for('skip-override')] = true

export const fastifyRateLimit = plugin
