import type { LeaseGrant } from '../../shared/index.js'
import type { LeaseBatch } from '../pool/index.js'

/**
 * A lease batch that leaves `lateMs` later than the pool counted it from
 * (its ledger write finished past `server.ledgerMaxWriteMs`): every lease's
 * life from receipt, and a quota window's end, shortened by that much, so
 * the client still enforces nothing past what the coordinator counts (sent
 * at `made + ledgerMaxWriteMs`, held `ttlMs + graceMs` from then). Undefined
 * when a lease would have nothing left: the batch is not sent, and its
 * client is renewed at its next report. Pure; the batch given is not changed.
 */
export function lateBatch(batch: LeaseBatch, lateMs: number): LeaseBatch | undefined {
  const byMs = Math.ceil(lateMs)
  if (byMs <= 0) return batch
  const leases: LeaseGrant[] = []
  for (const lease of batch.leases) {
    // A lease with no life (a key sent back to the default split) carries nothing to shorten.
    if (lease.ttlMs === 0) {
      leases.push(lease)
      continue
    }
    if (lease.ttlMs <= byMs) return undefined
    leases.push({
      ...lease,
      ttlMs: lease.ttlMs - byMs,
      ...(lease.window === undefined
        ? {}
        : { window: { ...lease.window, endsInMs: Math.max(0, lease.window.endsInMs - byMs) } }),
    })
  }
  return { clientKey: batch.clientKey, seq: batch.seq, leases }
}
