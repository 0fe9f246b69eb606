import type { IncomingMessage, ServerResponse } from 'node:http'
import { SluiceError } from '../../shared/index.js'
import { RateLimitCore, type Decision, type RateLimitInfo } from './core.js'
import type { RateLimitOptions } from './options.js'

export type Middleware = (
  req: IncomingMessage,
  res: ServerResponse,
  next?: (error?: unknown) => void,
) => Promise<boolean>

/**
 * The same limits for plain `node:http` and Express-style stacks. Call it
 * first in a handler: it resolves to true when the request may go on (and
 * calls `next()` if given), or answers the refusal itself and resolves to
 * false. Options are checked here, once.
 */
const allowed = Promise.resolve(true)

/** The path of a request URL, without its query (no new string when there is none). */
function pathOf(url: string | undefined): string {
  if (url === undefined) return '/'
  const q = url.indexOf('?')
  return q === -1 ? url : url.slice(0, q)
}

/** Where the middleware puts what express-rate-limit calls `req.rateLimit`: read when asked for. */
function defineRateLimit(req: IncomingMessage, core: RateLimitCore, decision: Decision): void {
  let info: RateLimitInfo | undefined
  Object.defineProperty(req, 'rateLimit', {
    configurable: true,
    enumerable: true,
    get: () => (info ??= core.info(decision)),
  })
}

const noNext = (): void => undefined

/**
 * What the middleware put on a request it checked (`req.rateLimit`, as express-rate-limit
 * names it), typed: the tightest limit's quota, what was used and remains, when it is whole
 * again, and the key. Undefined for a request it did not limit (skipped, allow-listed).
 */
export function rateLimitOf(req: object): RateLimitInfo | undefined {
  return (req as { rateLimit?: RateLimitInfo }).rateLimit
}

export function createRateLimitMiddleware(options: RateLimitOptions): Middleware {
  if (options?.global !== undefined)
    throw new SluiceError(
      'SLUICE_ERR_OPTION_INVALID',
      'createRateLimitMiddleware: global: the fastify plugin’s option (which routes it limits); the middleware limits the requests it is called for',
    )
  const core = new RateLimitCore(options, 'createRateLimitMiddleware')
  const handler = core.options.handler
  const answer = (
    req: IncomingMessage,
    res: ServerResponse,
    decision: Decision | undefined,
    next: ((error?: unknown) => void) | undefined,
  ): boolean => {
    if (decision !== undefined) {
      const headers = decision.headers
      for (const name in headers) res.setHeader(name, headers[name]!)
      defineRateLimit(req, core, decision)
    }
    if (decision === undefined || decision.allowed) {
      if (decision !== undefined && core.settles)
        res.once('finish', () => core.settle(decision, res.statusCode))
      next?.()
      return true
    }
    if (handler !== undefined && decision.context !== undefined) {
      res.statusCode = decision.statusCode
      handler(req, res, next ?? noNext, decision.context)
      return false
    }
    res.statusCode = decision.statusCode
    if (typeof decision.body === 'string') {
      res.setHeader('content-type', 'text/plain; charset=utf-8')
      res.end(decision.body)
    } else {
      res.setHeader('content-type', 'application/json; charset=utf-8')
      res.end(JSON.stringify(decision.body))
    }
    return false
  }
  let warned = false
  // Not an async function: the allow path answers with one shared resolved promise.
  return (req, res, next) => {
    // Express sets req.ip from its `trust proxy` setting (the client behind the load balancer);
    // plain node:http has only the socket's address.
    const express = req as IncomingMessage & {
      ip?: string
      app?: { get?: (name: string) => unknown }
    }
    if (!warned && express.app?.get !== undefined && req.headers['x-forwarded-for'] !== undefined) {
      const trust = express.app.get('trust proxy')
      if (trust === false || trust === undefined) {
        warned = true
        process.emitWarning(
          "the request has X-Forwarded-For, but Express's 'trust proxy' is off: every caller behind the proxy shares one key (the proxy's address). Set app.set('trust proxy', 1) (the number of proxies in front), as express-rate-limit advises",
          { code: 'SLUICE_ERR_HTTP_TRUST_PROXY' },
        )
      }
    }
    let decision: ReturnType<RateLimitCore['decide']>
    try {
      decision = core.decide({
        ip: express.ip ?? req.socket.remoteAddress ?? '',
        method: req.method ?? 'GET',
        headers: req.headers,
        route: pathOf(req.url),
        request: req,
        reply: res,
      })
    } catch (error) {
      return Promise.reject(error instanceof Error ? error : new Error(String(error)))
    }
    if (decision instanceof Promise) return decision.then((d) => answer(req, res, d, next))
    return answer(req, res, decision, next) ? allowed : Promise.resolve(false)
  }
}
