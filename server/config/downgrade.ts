import type { Config } from './schema.js'

/**
 * What a new config would take away from the old one's security: TLS (or
 * its client certificates), the admin token, the read token, the holdings
 * key, or tenant authentication. A reload that does any of these is refused
 * unless the new config sets `server.securityDowngrade`.
 */
export function securityDowngrades(old: Config, next: Config): string[] {
  const lost: string[] = []
  if (old.server.tls !== undefined && next.server.tls === undefined) lost.push('server.tls removed')
  if (old.server.tls?.clientCerts === 'require' && next.server.tls?.clientCerts !== 'require')
    lost.push('server.tls.clientCerts no longer required')
  if (old.server.adminToken !== undefined && next.server.adminToken === undefined)
    lost.push('server.adminToken removed')
  if (old.server.readToken !== undefined && next.server.readToken === undefined)
    lost.push('server.readToken removed')
  if (old.server.holdingsKey !== undefined && next.server.holdingsKey === undefined)
    lost.push('server.holdingsKey removed')
  if (Object.keys(old.tenants).length > 0 && Object.keys(next.tenants).length === 0)
    lost.push('tenants removed: clients would connect without a token')
  return lost
}
