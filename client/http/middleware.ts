import type { IncomingMessage, ServerResponse } from 'node:http'
import { RateLimitCore } from './core.js'
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
export function createRateLimitMiddleware(options: RateLimitOptions): Middleware {
  const core = new RateLimitCore(options, 'createRateLimitMiddleware')
  return async (req, res, next) => {
    // Behind a proxy, pass `key: { header: 'x-forwarded-for' }` to trust it; the socket address is the default.
    const decision = await core.decide({
      ip: req.socket.remoteAddress ?? '',
      method: req.method ?? 'GET',
      headers: req.headers,
      route: (req.url ?? '/').split('?')[0]!,
    })
    if (decision !== undefined)
      for (const [name, value] of Object.entries(decision.headers)) res.setHeader(name, value)
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
}
