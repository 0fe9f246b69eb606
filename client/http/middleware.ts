import type { IncomingMessage, ServerResponse } from 'node:http'
import { RateLimitCore, type Decision } from './core.js'
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

export function createRateLimitMiddleware(options: RateLimitOptions): Middleware {
  const core = new RateLimitCore(options, 'createRateLimitMiddleware')
  const answer = (
    res: ServerResponse,
    decision: Decision | undefined,
    next: ((error?: unknown) => void) | undefined,
  ): boolean => {
    if (decision !== undefined) {
      const headers = decision.headers
      for (const name in headers) res.setHeader(name, headers[name]!)
    }
    if (decision === undefined || decision.allowed) {
      if (decision !== undefined && core.settles)
        res.once('finish', () => core.settle(decision, res.statusCode))
      next?.()
      return true
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
  // Not an async function: the allow path answers with one shared resolved promise.
  return (req, res, next) => {
    // Behind a proxy, pass `key: { header: 'x-forwarded-for' }` to trust it; the socket address is the default.
    let decision: ReturnType<RateLimitCore['decide']>
    try {
      decision = core.decide({
        ip: req.socket.remoteAddress ?? '',
        method: req.method ?? 'GET',
        headers: req.headers,
        route: pathOf(req.url),
      })
    } catch (error) {
      return Promise.reject(error instanceof Error ? error : new Error(String(error)))
    }
    if (decision instanceof Promise) return decision.then((d) => answer(res, d, next))
    return answer(res, decision, next) ? allowed : Promise.resolve(false)
  }
}
