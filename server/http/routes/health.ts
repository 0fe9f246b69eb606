import type { FastifyInstance } from 'fastify'
import type { Coordinator } from '../../coordinator/index.js'
import { readsOpen } from '../auth.js'
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

  // Open to anyone (load balancers): it names the learning resources only while reads are
  // open too; behind a read token it says how many.
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
      ...(readsOpen(coordinator) ? { learning } : {}),
      learningCount: learning.length,
      ledger: coordinator.ledgerState,
    })
  })
}
