import type { FastifyInstance } from 'fastify'
import type { Coordinator } from '../../coordinator/index.js'
import { resourceSummaries } from '../status.js'

/**
 * Health and readiness. Ready means "grants leases here": a follower
 * answers 503 with the leader it knows, so a load balancer that follows
 * readiness sends clients straight to the leader.
 */
export function healthRoutes(
  app: FastifyInstance,
  coordinator: Coordinator,
  ready: () => boolean,
): void {
  app.get('/healthz', async () => ({ status: 'ok' }))

  app.get('/readyz', async (_req, reply) => {
    const role = coordinator.role
    const isReady = ready() && role === 'leader'
    const learning = resourceSummaries(coordinator)
      .filter((r) => r.learning)
      .map((r) => r.id)
    return reply.code(isReady ? 200 : 503).send({
      ready: isReady,
      role,
      ...(role === 'follower' ? { leader: coordinator.leaderUrl ?? null } : {}),
      learning,
      ledger: coordinator.ledgerState,
    })
  })
}
