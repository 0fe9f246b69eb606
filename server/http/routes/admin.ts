import type { FastifyInstance } from 'fastify'
import { SluiceError } from '../../../shared/index.js'
import type { Coordinator } from '../../coordinator/index.js'
import { adminHook } from '../auth.js'
import { errorBody } from '../errors.js'

/** Admin actions behind the admin token: reload the config (from its file, or the body). */
export function adminRoutes(
  app: FastifyInstance,
  coordinator: Coordinator,
  reload: (body: unknown) => Promise<{ resources: number; tenants: number }>,
): void {
  // The config's own formats: a YAML (or JSON) body is parsed by the config loader, which
  // names the line of each bad field.
  app.addContentTypeParser(
    ['application/yaml', 'application/x-yaml', 'text/yaml', 'text/x-yaml', 'text/plain'],
    { parseAs: 'string' },
    (_req, body, done) => done(null, body),
  )

  app.post('/v1/admin/reload', { preHandler: adminHook(coordinator) }, async (req, reply) => {
    try {
      const summary = await reload(req.body)
      return { reloaded: true, ...summary }
    } catch (error) {
      if (error instanceof SluiceError)
        return reply.code(400).send(errorBody(error.code, error.detail))
      throw error
    }
  })
}
