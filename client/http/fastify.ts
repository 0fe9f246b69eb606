import type { FastifyPluginAsync, FastifyReply, FastifyRequest } from 'fastify'
import { SluiceError } from '../../shared/index.js'
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

/** On a connection's socket: its peer's address, read once. */
const peerIp = Symbol('sluice.rateLimit.peerIp')

/**
 * The client's address. Without `trustProxy` it is the connection's peer,
 * which never changes while the connection lasts: it is read once per
 * connection and kept on the socket, where `req.ip` would go through two
 * getters and the socket's `remoteAddress` on every request (about 850
 * instructions, 1.5% of a hello route: docs/benchmarks.md). Behind a
 * trusted proxy each request names its own client (X-Forwarded-For, possibly
 * a different one per request on one connection), so `req.ip` is read every
 * time; fastify defines `req.ips` only then.
 */
function ipOf(req: FastifyRequest): string {
  if ('ips' in req) return req.ip
  const socket = req.raw.socket as { remoteAddress?: string; [peerIp]?: string } | null
  if (socket === null || socket === undefined) return req.ip
  let ip = socket[peerIp]
  if (ip === undefined) {
    ip = socket.remoteAddress
    if (ip === undefined) return req.ip
    socket[peerIp] = ip
  }
  return ip
}

function info(req: FastifyRequest, reply: FastifyReply, url: string | undefined): RequestInfo {
  return {
    ip: ipOf(req),
    method: req.method,
    headers: req.headers,
    route: url ?? req.url.split('?')[0]!,
    request: req,
    reply,
  }
}

type RouteConfig = FastifyRequest['routeOptions']['config']
/** fastify's route context on a request: an internal symbol, looked for once (null: not there). */
let contextKey: symbol | null | undefined

/**
 * The route's config (its `rateLimit`, and the `url` fastify adds). Read
 * from fastify's route context where there is one, as `routeOptions` itself
 * does: `routeOptions` builds a new object of twelve fields on each access,
 * about 700 instructions a request (docs/benchmarks.md). Without the
 * context (another fastify), `routeOptions`.
 */
function configOf(req: FastifyRequest): RouteConfig {
  if (contextKey === undefined)
    contextKey =
      Object.getOwnPropertySymbols(req).find((s) => s.description === 'fastify.context') ?? null
  if (contextKey !== null) {
    const config = (req as unknown as Record<symbol, { config?: RouteConfig } | undefined>)[
      contextKey
    ]?.config
    if (config !== undefined) return config
  }
  return req.routeOptions.config
}

/** The decision a request was let through on, for the skip options after its response. */
const settling = Symbol('sluice.rateLimit.settling')
type Settling = { core: RateLimitCore; decision: Decision }
/** On a route's config: the plugin added a route-level onResponse hook to it. */
const hooked = Symbol('sluice.rateLimit.hooked')

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
  if (options?.handler !== undefined)
    throw new SluiceError(
      'SLUICE_ERR_OPTION_INVALID',
      'fastifyRateLimit: handler is the middleware’s (req, res, next); here the refusal’s body is errorResponse: (req, context) => body, and onLimited for side effects',
    )
  // global: false: only routes with a config.rateLimit of their own are limited, the plugin's
  // options their defaults (which then need not name a limit by themselves).
  const global =
    options?.global === false
      ? (checkRateLimitOptions(options, 'fastifyRateLimit'), undefined)
      : new RateLimitCore(options, 'fastifyRateLimit')
  // An onResponse hook costs every request it runs for (a few percent of a hello route, counted
  // in instructions: docs/benchmarks.md, "HTTP edge"), so one runs only where a limit gives costs
  // back: for every route when the plugin's options do, else on the routes whose own options do.
  const settleAll = global?.settles === true
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
    if (config === undefined || config === false) return
    const core = coreFor(config, `route ${String(route.method)} ${route.url}: config.rateLimit`)
    if (core.settles && !settleAll) {
      // Marked on the route's own config (fastify copies it, symbols too), not on the rateLimit
      // object, which a route declared before the plugin may share.
      route.config = { ...route.config, [hooked]: true } as NonNullable<typeof route.config>
      const own = route.onResponse
      route.onResponse = own === undefined ? [settle] : [own, settle].flat()
    }
  })
  // A callback hook, not an async one: the allow path then costs no promise and no closure.
  const apply = (
    req: FastifyRequest,
    reply: FastifyReply,
    done: (error?: Error) => void,
    core: RateLimitCore,
    decision: Decision | undefined,
    routeConfig: object,
  ): void => {
    if (decision === undefined) return done()
    // One header() per field: reply.headers() would first list the fields in an array.
    const headers = decision.headers
    for (const name in headers) void reply.header(name, headers[name])
    if (!decision.allowed) return send(reply, decision)
    if (core.settles) {
      if (settleAll || (routeConfig as Record<symbol, unknown>)[hooked] === true)
        (req as unknown as Record<symbol, Settling>)[settling] = { core, decision }
      // A route declared before the plugin has no hook of ours: its response is watched instead,
      // 'finish' as fastify's onResponse: a response never finished (its client went away)
      // keeps its cost, or aborting each request would take back every token.
      else reply.raw.once('finish', () => core.settle(decision, reply.raw.statusCode))
    }
    done()
  }
  app.addHook('onRequest', (req, reply, done) => {
    const routeConfig = configOf(req)
    const config = routeConfig.rateLimit
    if (config === false) return done()
    if (config === undefined && global === undefined) return done()
    let core: RateLimitCore
    let decision: ReturnType<RateLimitCore['decide']>
    try {
      // A route declared before the plugin was registered is checked here, on its first request.
      core =
        config === undefined
          ? global!
          : coreFor(config, `route ${routeConfig.url}: config.rateLimit`)
      decision = core.decide(info(req, reply, routeConfig.url))
    } catch (error) {
      return done(error as Error)
    }
    if (decision instanceof Promise)
      decision.then((d) => apply(req, reply, done, core, d, routeConfig), done)
    else apply(req, reply, done, core, decision, routeConfig)
  })
  if (settleAll) app.addHook('onResponse', settle)
}

/** Gives a request's cost back after its response, when the skip options say so. */
function settle(req: FastifyRequest, reply: FastifyReply, done: () => void): void {
  const s = (req as unknown as Record<symbol, Settling | undefined>)[settling]
  if (s !== undefined) s.core.settle(s.decision, reply.statusCode)
  done()
}
// Applies to the whole app, not only to routes registered inside the plugin (what fastify-plugin does).
;(plugin as unknown as Record<symbol, boolean>)[Symbol.for('skip-override')] = true

export const fastifyRateLimit = plugin
