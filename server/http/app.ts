import { createHash, timingSafeEqual } from 'node:crypto'
import Fastify, { type FastifyInstance, type FastifyReply, type FastifyRequest } from 'fastify'
import type { Logger } from 'pino'
import {
  SluiceError,
  bearerToken,
  errorCatalogue,
  formatError,
  type Clock,
  type ErrorCode,
} from '../../shared/index.js'
import type { TlsMaterial } from '../config/index.js'
import type { Coordinator } from '../coordinator/index.js'
import { registerDashboard } from './dashboard/index.js'
import { resourceDetail, resourceSummaries, templateSummaries, tenantSummaries } from './status.js'

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

function errorBody(
  code: ErrorCode,
  detail = '',
): { error: { code: ErrorCode; message: string; retryable: boolean } } {
  return {
    error: { code, message: formatError(code, detail), retryable: errorCatalogue[code].retryable },
  }
}

/** Everything, or one tenant's own clients. */
type ReadAccess = { readonly all: true } | { readonly all: false; readonly tenant: string }

/** Compares tokens in constant time, lengths included (through their digests). */
function sameToken(given: string, expected: string): boolean {
  const digest = (t: string): Buffer => createHash('sha256').update(t).digest()
  return timingSafeEqual(digest(given), digest(expected))
}

/**
 * The coordinator's HTTP API on the same port as its WebSocket endpoint:
 * health, readiness, Prometheus metrics, JSON status, and admin routes
 * behind the admin token.
 */
export function buildHttpApp(options: HttpOptions): FastifyInstance {
  const { coordinator, clock } = options
  // Fastify's per-request logging would put a line per scrape in the log; we log what matters ourselves.
  const tls = options.tls
  const app = (
    tls === undefined
      ? Fastify({ logger: false, bodyLimit: 1024 * 1024 })
      : Fastify({
          logger: false,
          bodyLimit: 1024 * 1024,
          https: {
            key: tls.key,
            cert: tls.cert,
            ...(tls.ca === undefined ? {} : { ca: tls.ca }),
            requestCert: tls.requestCert,
            rejectUnauthorized: tls.requestCert,
          },
        })
  ) as FastifyInstance

  app.get('/healthz', async () => ({ status: 'ok' }))

  // Ready means "grants leases here": a follower answers 503 with the leader it knows, so a
  // load balancer that follows readiness sends clients straight to the leader.
  app.get('/readyz', async (_req, reply) => {
    const role = coordinator.role
    const ready = options.ready() && role === 'leader'
    const learning = resourceSummaries(coordinator)
      .filter((r) => r.learning)
      .map((r) => r.id)
    return reply.code(ready ? 200 : 503).send({
      ready,
      role,
      ...(role === 'follower' ? { leader: coordinator.leaderUrl ?? null } : {}),
      learning,
      ledger: coordinator.ledgerState,
    })
  })

  registerDashboard(app)

  /**
   * Who may read: everyone while reads are open (no read token, no tenants);
   * otherwise the read or admin token sees everything, and a tenant's token
   * its own clients only. Undefined after a refusal was sent.
   */
  const readAccess = async (
    req: FastifyRequest,
    reply: FastifyReply,
  ): Promise<ReadAccess | undefined> => {
    const { server, tenants } = coordinator.config
    if (server.readToken === undefined && Object.keys(tenants).length === 0) return { all: true }
    const token = bearerToken(req.headers.authorization)
    if (!coordinator.guard.mayTry(req.ip, 'http')) {
      await reply
        .code(429)
        .send(errorBody('SLUICE_ERR_AUTH_RATE_LIMITED', 'wait before trying another token'))
      return undefined
    }
    if (token !== undefined) {
      for (const expected of [server.readToken, server.adminToken])
        if (expected !== undefined && sameToken(token, expected)) return { all: true }
      const tenant = coordinator.tenantByToken(token)
      if (tenant !== undefined) return { all: false, tenant }
    }
    coordinator.guard.failed(req.ip, 'http')
    await reply
      .code(401)
      .header('www-authenticate', 'Bearer')
      .send(errorBody('SLUICE_ERR_HTTP_UNAUTHORIZED', 'send the read, admin or a tenant token'))
    return undefined
  }

  app.get('/metrics', async (req, reply) => {
    const access = await readAccess(req, reply)
    if (access === undefined) return reply
    if (!access.all)
      return reply
        .code(403)
        .send(errorBody('SLUICE_ERR_HTTP_UNAUTHORIZED', 'metrics need the read or admin token'))
    const registry = coordinator.metrics.registry
    return reply.type(registry.contentType).send(await registry.metrics())
  })

  app.get('/v1/resources', async (req, reply) => {
    const access = await readAccess(req, reply)
    if (access === undefined) return reply
    const all = resourceSummaries(coordinator)
    if (access.all) return { resources: all, templates: templateSummaries(coordinator) }
    // A tenant sees the resources its clients use.
    return {
      resources: all.filter((r) =>
        coordinator.view.clients(r.id).some((c) => c.tenant === access.tenant),
      ),
    }
  })

  // Configured tenants and what their clients hold; a tenant's token sees its own entry.
  app.get('/v1/tenants', async (req, reply) => {
    const access = await readAccess(req, reply)
    if (access === undefined) return reply
    const all = tenantSummaries(coordinator)
    return { tenants: access.all ? all : all.filter((t) => t.name === access.tenant) }
  })

  // A wildcard, so ids with `/` work with or without percent-encoding.
  app.get('/v1/resources/*', async (req: FastifyRequest<{ Params: { '*': string } }>, reply) => {
    const access = await readAccess(req, reply)
    if (access === undefined) return reply
    const path = req.params['*']
    // `<id>/history`: the resource's samples (an id that itself ends in /history is read as such
    // only when no resource is named by what comes before).
    const historyOf = path.endsWith('/history') ? path.slice(0, -'/history'.length) : undefined
    if (historyOf !== undefined && coordinator.observer.history(historyOf, 0, 0) !== undefined)
      return history(req, reply, access, historyOf)
    const id = path
    const detail = resourceDetail(coordinator, id, clock.now())
    const visible =
      detail === undefined || access.all
        ? detail
        : {
            ...detail,
            clientDetails: detail.clientDetails.filter((c) => c.tenant === access.tenant),
          }
    if (visible === undefined || (visible.clientDetails.length === 0 && !access.all))
      return reply
        .code(404)
        .send(
          errorBody('SLUICE_ERR_HTTP_NOT_FOUND', `no clients use resource ${JSON.stringify(id)}`),
        )
    return visible
  })

  const rangeMs = (text: string): number | undefined => {
    const m = /^(\d+)(s|m|h)$/.exec(text)
    if (m === null) return undefined
    const ms = Number(m[1]) * { s: 1000, m: 60_000, h: 3_600_000 }[m[2] as 's' | 'm' | 'h']
    return ms > 0 && ms <= 86_400_000 ? ms : undefined
  }
  const history = async (
    req: FastifyRequest,
    reply: FastifyReply,
    access: ReadAccess,
    id: string,
  ): Promise<unknown> => {
    if (!access.all && !coordinator.view.clients(id).some((c) => c.tenant === access.tenant))
      return reply
        .code(404)
        .send(
          errorBody('SLUICE_ERR_HTTP_NOT_FOUND', `no clients use resource ${JSON.stringify(id)}`),
        )
    const query = req.query as { range?: string; from?: string; to?: string; client?: string }
    if (query.client !== undefined) {
      // One client's admitted and refused rates over the last minutes.
      const c = coordinator.view
        .clients(id)
        .find((x) => x.id === query.client && (access.all || x.tenant === access.tenant))
      const recent =
        c === undefined ? undefined : coordinator.observer.clientRecent(id, c.tenant, c.id)
      if (c === undefined)
        return reply
          .code(404)
          .send(
            errorBody(
              'SLUICE_ERR_HTTP_NOT_FOUND',
              `no client ${JSON.stringify(query.client)} uses resource ${JSON.stringify(id)}`,
            ),
          )
      return {
        id,
        client: c.id,
        stepMs: recent?.stepMs ?? 5000,
        t: recent?.t ?? [],
        admitted: recent?.admittedPerSec ?? [],
        refused: recent?.refusedPerSec ?? [],
      }
    }
    const span = rangeMs(query.range ?? '15m')
    const now = clock.wallNow()
    const asked = query.from === undefined ? undefined : Number(query.from)
    // Without `to`, up to now; a poll for what is newer than its last sample (`from` just past
    // it) gets an empty answer, not an error, when no sample has come since.
    const to = query.to === undefined ? Math.max(now, asked ?? now) : Number(query.to)
    const from = asked ?? to - (span ?? 0)
    if (span === undefined || !Number.isFinite(from) || !Number.isFinite(to) || from > to)
      return reply
        .code(400)
        .send(
          errorBody(
            'SLUICE_ERR_HTTP_BAD_REQUEST',
            'range is a span such as 90s, 15m, 6h or 24h (at most 24h); from and to are ms since the epoch',
          ),
        )
    const series = coordinator.observer.history(id, from, to)!
    return { id, from, to, stepMs: series.stepMs, t: series.t, ...series.columns }
  }

  const requireAdmin = async (req: FastifyRequest, reply: FastifyReply): Promise<void> => {
    const expected = coordinator.config.server.adminToken
    const token = bearerToken(req.headers.authorization)
    if (expected === undefined) {
      await reply
        .code(403)
        .send(errorBody('SLUICE_ERR_HTTP_UNAUTHORIZED', 'no server.adminToken is configured'))
    } else if (!coordinator.guard.mayTry(req.ip, 'http')) {
      await reply
        .code(429)
        .send(errorBody('SLUICE_ERR_AUTH_RATE_LIMITED', 'wait before trying another token'))
    } else if (token === undefined || !sameToken(token, expected)) {
      coordinator.guard.failed(req.ip, 'http')
      await reply.code(401).send(errorBody('SLUICE_ERR_HTTP_UNAUTHORIZED'))
    }
  }

  // The config's own formats: a YAML (or JSON) body is parsed by the config loader, which
  // names the line of each bad field.
  app.addContentTypeParser(
    ['application/yaml', 'application/x-yaml', 'text/yaml', 'text/x-yaml', 'text/plain'],
    { parseAs: 'string' },
    (_req, body, done) => done(null, body),
  )

  app.post('/v1/admin/reload', { preHandler: requireAdmin }, async (req, reply) => {
    try {
      const summary = await options.reload(req.body)
      return { reloaded: true, ...summary }
    } catch (error) {
      if (error instanceof SluiceError)
        return reply.code(400).send(errorBody(error.code, error.detail))
      throw error
    }
  })

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
