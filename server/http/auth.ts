import { createHash, timingSafeEqual } from 'node:crypto'
import type { FastifyReply, FastifyRequest } from 'fastify'
import { bearerToken } from '../../shared/index.js'
import type { Coordinator } from '../coordinator/index.js'
import { errorBody } from './errors.js'

/** Everything, or one tenant's own clients. */
export type ReadAccess = { readonly all: true } | { readonly all: false; readonly tenant: string }

declare module 'fastify' {
  interface FastifyRequest {
    /** Who may read what, set by the `readAccess` hook of a read route. */
    access: ReadAccess
  }
}

/** Compares tokens in constant time, lengths included (through their digests). */
function sameToken(given: string, expected: string): boolean {
  const digest = (t: string): Buffer => createHash('sha256').update(t).digest()
  return timingSafeEqual(digest(given), digest(expected))
}

/** Whether reads need no token: no read token and no tenants. */
export function readsOpen(coordinator: Coordinator): boolean {
  const { server, tenants } = coordinator.config
  return server.readToken === undefined && Object.keys(tenants).length === 0
}

/**
 * A preHandler for read routes. Who may read: everyone while reads are open
 * (no read token, no tenants); otherwise the read or admin token sees
 * everything, and a tenant's token its own clients only. Sets `req.access`,
 * or answers 401 (429 while the address guesses too fast).
 */
export function readAccessHook(coordinator: Coordinator) {
  return async (req: FastifyRequest, reply: FastifyReply): Promise<void> => {
    if (readsOpen(coordinator)) {
      req.access = { all: true }
      return
    }
    const { server } = coordinator.config
    const token = bearerToken(req.headers.authorization)
    if (!coordinator.guard.mayTry(req.ip, 'http')) {
      await reply
        .code(429)
        .send(errorBody('SLUICE_ERR_AUTH_RATE_LIMITED', 'wait before trying another token'))
      return
    }
    if (token !== undefined) {
      for (const expected of [server.readToken, server.adminToken])
        if (expected !== undefined && sameToken(token, expected)) {
          req.access = { all: true }
          return
        }
      const tenant = coordinator.tenantByToken(token)
      if (tenant !== undefined) {
        req.access = { all: false, tenant }
        return
      }
    }
    coordinator.guard.failed(req.ip, 'http')
    await reply
      .code(401)
      .header('www-authenticate', 'Bearer')
      .send(errorBody('SLUICE_ERR_HTTP_UNAUTHORIZED', 'send the read, admin or a tenant token'))
  }
}

/** A preHandler for admin routes: the admin token, or 403 (none configured), 401 or 429. */
export function adminHook(coordinator: Coordinator) {
  return async (req: FastifyRequest, reply: FastifyReply): Promise<void> => {
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
}
