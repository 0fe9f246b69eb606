import type { FastifyInstance } from 'fastify'
import { z } from 'zod'
import { SluiceError, keyProblem } from '../../../shared/index.js'
import type { Coordinator } from '../../coordinator/index.js'
import { resetWaitRefreshes } from '../../pool/index.js'
import { adminHook } from '../auth.js'
import { errorBody } from '../errors.js'

const keyResetBody = z.strictObject({ family: z.string(), key: z.string() })

/**
 * Admin actions behind the admin token: reload the config (from its file, or the body);
 * reset a keyed quota's key.
 */
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

  // A keyed quota's key gets its whole budget again for the rest of the window (once its
  // holders said what they spent), a rate key a full bucket (server/pool/reset.ts). An admin
  // action: it gives budget.
  app.post('/v1/key/reset', { preHandler: adminHook(coordinator) }, async (req, reply) => {
    const usage = 'POST /v1/key/reset {"family": "<prefix>", "key": "<key>"}'
    const body = keyResetBody.safeParse(req.body)
    const prefix = body.success ? body.data.family.replace(/\/\*$/, '') : ''
    const problem = !body.success
      ? 'a JSON body with family and key, both strings'
      : prefix === ''
        ? 'family: the prefix of a keyed family, such as apikey'
        : keyProblem(prefix, body.data.key)
    if (problem !== undefined)
      return reply.code(400).send(errorBody('SLUICE_ERR_HTTP_BAD_REQUEST', `${usage}: ${problem}`))
    const key = body.data!.key
    const family = `${prefix}/*`
    const result = coordinator.resetKey(prefix, key)
    switch (result.outcome) {
      case 'pending': {
        const refreshMs = coordinator.settingsFor(family)?.refreshMs ?? 1000
        return reply.code(202).send({
          family,
          key,
          reset: 'pending',
          window: result.window,
          // Once every holder reported the key since, or this long at most.
          takesEffectWithinMs: (resetWaitRefreshes + 1) * refreshMs,
        })
      }
      case 'refilled':
        return {
          family,
          key,
          reset: 'refilled',
          holders: result.holders,
          detail: `every connected holder of the key is sent its lease with a full bucket: it admits a burst again from when each gets it (within a lease's one-way delay)`,
        }
      case 'unused':
        return {
          family,
          key,
          reset: 'nothing spent',
          detail: `no process holds any of ${family}: nothing of the key is spent`,
        }
      case 'not-keyed':
        return reply
          .code(404)
          .send(errorBody('SLUICE_ERR_HTTP_NOT_FOUND', `${family} is not a keyed family`))
      case 'not-quota':
        return reply
          .code(400)
          .send(
            errorBody(
              'SLUICE_ERR_HTTP_BAD_REQUEST',
              `${family} is a concurrency family: a key's slots come back as its work ends; a keyed quota's budget and a rate key's bucket can be reset`,
            ),
          )
      case 'hot-keys-full':
        return reply
          .code(409)
          .send(
            errorBody(
              'SLUICE_ERR_HTTP_KEY_NOT_RESET',
              `${family} leases ${result.maxHotKeys} keys on their own (its maxHotKeys): ${JSON.stringify(key)} cannot be made one to learn what was spent of it; retry once a key goes cold`,
            ),
          )
      case 'not-leader':
        return reply
          .code(503)
          .send(
            errorBody(
              'SLUICE_ERR_NOT_LEADER',
              coordinator.leaderUrl === undefined
                ? 'no leader is known yet'
                : `the leader is ${coordinator.leaderUrl}`,
            ),
          )
    }
  })
}
