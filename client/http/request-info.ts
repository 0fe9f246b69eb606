import type { IncomingHttpHeaders } from 'node:http'
import type { RequestInfo } from './options.js'

/**
 * A request as the options' callbacks see it, its fields read from the
 * framework's request when a callback asks for them. node:http builds a
 * request's headers object on first access: a limit keyed by IP that never
 * looks at headers would otherwise pay for it on every request
 * (docs/benchmarks.md, "HTTP edge").
 */
export abstract class LazyRequestInfo implements RequestInfo {
  abstract readonly ip: string
  abstract readonly method: string
  abstract readonly headers: IncomingHttpHeaders
  abstract readonly route: string

  /** What a logger or JSON.stringify shows: every field, as a plain object would. */
  toJSON(): RequestInfo {
    return { ip: this.ip, method: this.method, headers: this.headers, route: this.route }
  }
}
