import { createServer } from 'node:http'
import { createClient } from '../../client/index.js'
import { createRateLimitMiddleware } from '../../client/http/index.js'
import { hostMs } from './host-time.js'

/** An HTTP gateway of the hostile-keys scenario: limited per API key, and by a whole-API resource. */
export interface GatewayWorkerSpec {
  readonly url: string
  readonly clientId: string
  /** The keyed family's prefix (per `x-api-key`). */
  readonly prefix: string
  /** An ordinary resource every request also passes (the whole API's capacity). */
  readonly resource: string
  /** Stops by itself after this long. */
  readonly durationMs: number
}

/**
 * `node gateway-worker.js SPEC_JSON`: a real gateway process, as the docs have
 * one (`createRateLimitMiddleware({ resource: client.keyed(prefix), key: {
 * header: 'x-api-key' } })`), with every request also passing `resource`.
 * Logs on stdout, one JSON object a line: `{listening: port}` once, each
 * connect and disconnect of its client (with the close code), and every
 * coded error the client surfaces. Stops by itself.
 */
async function main(): Promise<void> {
  const spec = JSON.parse(process.argv[2] ?? '{}') as GatewayWorkerSpec
  const log = (o: Record<string, unknown>): void => {
    process.stdout.write(`${JSON.stringify({ t: hostMs(), ...o })}\n`)
  }
  const client = createClient({
    url: spec.url,
    clientId: spec.clientId,
    backoffBaseMs: 100,
    backoffCapMs: 1000,
  })
  client.on('connect', () => log({ connected: true }))
  client.on('disconnect', (code) => log({ connected: false, code }))
  client.on('error', (e) => log({ error: e.code }))
  const perKey = client.keyed(spec.prefix)
  const api = client.resource(spec.resource)
  api.on('lease', (lease) => log({ api: lease.capacity }))
  await Promise.all([perKey.ready({ timeoutMs: 10_000 }), api.ready({ timeoutMs: 10_000 })])
  const byKey = createRateLimitMiddleware({ resource: perKey, key: { header: 'x-api-key' } })
  const whole = createRateLimitMiddleware({ resource: api, key: 'route' })
  const server = createServer((req, res) => {
    void (async () => {
      if (!(await byKey(req, res))) return
      if (!(await whole(req, res))) return
      res.end('ok')
    })()
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  log({ listening: (server.address() as { port: number }).port })
  await new Promise((resolve) => setTimeout(resolve, spec.durationMs))
  server.close()
  await client.close()
}

await main()
process.exit(0)
