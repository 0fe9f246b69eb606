import type { IncomingMessage, ServerResponse } from 'node:http'
import { RateLimitCore, type RateLimitOptions } from './core.js'

export type Middleware = (
  req: IncomingMessage,
  res: ServerResponse,
  next?: (error?: unknown) => void,
) => Promise<boolean>

/**
 * The same limits for plain `node:http` and Express-style stacks. Call it
 * first in a handler: it resolves to true when the request may go on (and
 * calls `next()` if given), or answers 429 itself and resolves to false.
 */
export function createRateLimitMiddleware(options: RateLimitOptions): Middleware {
  const core = new RateLimitCore(options)
  return async (req, res, next) => {
    // Behind a proxy, pass `key: { header: 'x-forwarded-for' }` to trust it; the socket address is the default.
    const decision = await core.decide({
      ip: req.socket.remoteAddress ?? '',
      headers: req.headers,
      route: (req.url ?? '/').split('?')[0]!,
    })
    if (decision !== undefined)
      for (const [name, value] of Object.entries(decision.headers)) res.setHeader(name, value)
    if (decision === undefined || decision.allowed) {
      next?.()
      return true
    }
    res.statusCode = 429
    res.setHeader('content-type', 'application/json; charset=utf-8')
    res.end(JSON.stringify(decision.body))
    return false
  }
}
