import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify'
import { keyProblem, type Clock } from '../../../shared/index.js'
import type { Coordinator } from '../../coordinator/index.js'
import { readAccessHook, type ReadAccess } from '../auth.js'
import { errorBody } from '../errors.js'
import { resourceDetail, resourceSummaries, templateSummaries, tenantSummaries } from '../status.js'

/** `15m`, `90s`, `6h`: a span of at most 24 h, in ms; undefined when it is not one. */
function rangeMs(text: string): number | undefined {
  const m = /^(\d+)(s|m|h)$/.exec(text)
  if (m === null) return undefined
  const ms = Number(m[1]) * { s: 1000, m: 60_000, h: 3_600_000 }[m[2] as 's' | 'm' | 'h']
  return ms > 0 && ms <= 86_400_000 ? ms : undefined
}

function notFound(reply: FastifyReply, what: string): FastifyReply {
  return reply.code(404).send(errorBody('SLUICE_ERR_HTTP_NOT_FOUND', what))
}

/** Whether `access` may see resource `id`: all, or one of its tenant's clients uses it. */
function sees(coordinator: Coordinator, access: ReadAccess, id: string): boolean {
  return access.all || coordinator.view.clients(id).some((c) => c.tenant === access.tenant)
}

/**
 * What operators read, each route behind the read access hook: Prometheus
 * metrics (read or admin token), resources, tenants, one resource, and its
 * history; a tenant's token sees what its own clients use.
 */
export function statusRoutes(app: FastifyInstance, coordinator: Coordinator, clock: Clock): void {
  const preHandler = readAccessHook(coordinator)

  app.get('/metrics', { preHandler }, async (req, reply) => {
    if (!req.access.all)
      return reply
        .code(403)
        .send(errorBody('SLUICE_ERR_HTTP_UNAUTHORIZED', 'metrics need the read or admin token'))
    const registry = coordinator.metrics.registry
    return reply.type(registry.contentType).send(await registry.metrics())
  })

  app.get('/v1/resources', { preHandler }, async (req) => {
    const all = resourceSummaries(coordinator)
    if (req.access.all) return { resources: all, templates: templateSummaries(coordinator) }
    return { resources: all.filter((r) => sees(coordinator, req.access, r.id)) }
  })

  // Keyed families: holders, hot keys and the most demanded of them. Keys name callers (API
  // keys, addresses): the read or admin token only.
  app.get('/v1/families', { preHandler }, async (req, reply) => {
    if (!req.access.all)
      return reply
        .code(403)
        .send(errorBody('SLUICE_ERR_HTTP_UNAUTHORIZED', 'families need the read or admin token'))
    const query = req.query as { top?: string }
    const top = Math.min(1000, Math.max(0, Number(query.top ?? 20) || 0))
    // With what every key admitted and refused together, as the processes report it.
    return { families: coordinator.observer.families(top) }
  })

  // One key of a keyed family: its limit, who may use how much of it, and what was used (a
  // quota's key leased on its own). Keys name callers: the read or admin token only.
  app.get('/v1/key', { preHandler }, async (req, reply) => {
    if (!req.access.all)
      return reply
        .code(403)
        .send(errorBody('SLUICE_ERR_HTTP_UNAUTHORIZED', 'keys need the read or admin token'))
    const query = req.query as { family?: unknown; key?: unknown }
    const prefix = typeof query.family === 'string' ? query.family.replace(/\/\*$/, '') : ''
    const problem =
      prefix === ''
        ? 'family: the prefix of a keyed family, such as apikey'
        : keyProblem(prefix, query.key)
    if (problem !== undefined)
      return reply
        .code(400)
        .send(
          errorBody(
            'SLUICE_ERR_HTTP_BAD_REQUEST',
            `GET /v1/key?family=<prefix>&key=<key>: ${problem}`,
          ),
        )
    const found = coordinator.view.key(prefix, query.key as string)
    if (found === undefined) return notFound(reply, `${prefix}/* is not a keyed family`)
    return found
  })

  // Configured tenants and what their clients hold; a tenant's token sees its own entry.
  app.get('/v1/tenants', { preHandler }, async (req) => {
    const all = tenantSummaries(coordinator)
    const access = req.access
    return { tenants: access.all ? all : all.filter((t) => t.name === access.tenant) }
  })

  // A wildcard, so ids with `/` work with or without percent-encoding.
  app.get(
    '/v1/resources/*',
    { preHandler },
    async (req: FastifyRequest<{ Params: { '*': string } }>, reply) => {
      const access = req.access
      const path = req.params['*']
      // `<id>/history`: the resource's samples (an id that itself ends in /history is read as
      // such only when no resource is named by what comes before).
      const historyOf = path.endsWith('/history') ? path.slice(0, -'/history'.length) : undefined
      if (historyOf !== undefined && coordinator.observer.history(historyOf, 0, 0) !== undefined)
        return history(req, reply, historyOf)
      const detail = resourceDetail(coordinator, path, clock.now())
      const visible =
        detail === undefined || access.all
          ? detail
          : {
              ...detail,
              clientDetails: detail.clientDetails.filter((c) => c.tenant === access.tenant),
            }
      if (visible === undefined || (visible.clientDetails.length === 0 && !access.all))
        return notFound(reply, `no clients use resource ${JSON.stringify(path)}`)
      return visible
    },
  )

  const history = async (
    req: FastifyRequest,
    reply: FastifyReply,
    id: string,
  ): Promise<unknown> => {
    const access = req.access
    if (!sees(coordinator, access, id))
      return notFound(reply, `no clients use resource ${JSON.stringify(id)}`)
    const query = req.query as { range?: string; from?: string; to?: string; client?: string }
    if (query.client !== undefined) {
      // One client's admitted and refused rates over the last minutes.
      const c = coordinator.view
        .clients(id)
        .find((x) => x.id === query.client && (access.all || x.tenant === access.tenant))
      if (c === undefined)
        return notFound(
          reply,
          `no client ${JSON.stringify(query.client)} uses resource ${JSON.stringify(id)}`,
        )
      const recent = coordinator.observer.clientRecent(id, c.tenant, c.id)
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
}
