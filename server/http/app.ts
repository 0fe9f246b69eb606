import Fastify, { type FastifyInstance } from 'fastify'
import type { Logger } from 'pino'
import type { Clock } from '../../shared/index.js'
import type { TlsMaterial } from '../config/index.js'
import type { Coordinator } from '../coordinator/index.js'
import { registerDashboard } from './dashboard/index.js'
import { errorBody } from './errors.js'
import { adminRoutes, healthRoutes, statusRoutes } from './routes/index.js'

export interface HttpOptions {
  coordinator: Coordinator
  clock: Clock
  logger: Logger
  /** Reloads the config (from its file, or from the body when given); resolves to a summary. */
  reload: (body: unknown) => Promise<{ resources: number; tenants: number }>
  /** False while starting or closing. */
  ready: () => boolean
  /** Serve HTTPS (and WSS) with this material; plain HTTP without. */
  tls?: TlsMaterial | undefined
}

/**
 * The coordinator's routes validate with zod (routes/), never with a fastify schema: fastify's
 * own schema compilers (ajv and fast-json-stringify, about 80 ms of a coordinator's start, a
 * sixth of it, while its clients wait to reconnect) are never loaded. A route given a schema
 * fails when it is registered.
 */
const noSchemas = (): never => {
  throw new Error('the coordinator’s routes validate with zod: no fastify schema')
}
const zodOnly = { compilersFactory: { buildValidator: noSchemas, buildSerializer: noSchemas } }

/** Fastify over HTTPS with `tls`, plain HTTP without. */
function newFastify(tls: TlsMaterial | undefined): FastifyInstance {
  // Fastify's per-request logging would put a line per scrape in the log; we log what matters ourselves.
  const base = { logger: false, bodyLimit: 1024 * 1024, schemaController: zodOnly } as const
  if (tls === undefined) return Fastify(base)
  return Fastify({
    ...base,
    https: {
      key: tls.key,
      cert: tls.cert,
      ...(tls.ca === undefined ? {} : { ca: tls.ca }),
      requestCert: tls.requestCert,
      rejectUnauthorized: tls.requestCert,
    },
  })
}

/**
 * The coordinator's HTTP API on the same port as its WebSocket endpoint:
 * health and readiness, the dashboard, status and metrics behind the read
 * access hook, and admin routes behind the admin token.
 */
export function buildHttpApp(options: HttpOptions): FastifyInstance {
  const { coordinator, clock } = options
  const app = newFastify(options.tls)
  app.decorateRequest('access', null as unknown as { all: true })
  healthRoutes(app, coordinator, options.ready)
  registerDashboard(app)
  statusRoutes(app, coordinator, clock)
  adminRoutes(app, coordinator, options.reload)

  app.setNotFoundHandler(async (req, reply) =>
    reply.code(404).send(errorBody('SLUICE_ERR_HTTP_NOT_FOUND', `${req.method} ${req.url}`)),
  )

  app.setErrorHandler(async (error: Error & { statusCode?: number }, req, reply) => {
    const status = error.statusCode ?? 500
    if (status >= 500) options.logger.error({ err: error, url: req.url }, 'HTTP handler failed')
    return reply.code(status).send({
      error: {
        code: status >= 500 ? 'SLUICE_ERR_SERVER_INTERNAL' : 'SLUICE_ERR_HTTP_BAD_REQUEST',
        message: error.message,
        retryable: status >= 500,
      },
    })
  })

  return app
}
