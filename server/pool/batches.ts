import type { LeaseGrant } from '../../shared/index.js'
import type { ClientState } from './entry.js'
import { noBatches, type LeaseBatch, type PoolState } from './state.js'

/**
 * The lease batches of one call: one batch (one `lease` message, one
 * sequence number) per client, made on the client's first lease of the call
 * and handed out together by `flush`.
 */

/** The batch going to `client` in this flush, made on first use. */
export function batchOf(pool: PoolState, client: ClientState): LeaseBatch {
  let batch = pool.batches.get(client)
  if (batch === undefined) {
    batch = { clientKey: client.key, seq: ++pool.lastSeq, leases: [] }
    client.lastSentSeq = batch.seq
    pool.batches.set(client, batch)
  }
  return batch
}

/**
 * Puts `grant` in `batch`. One lease of a resource per batch: a second one in the same flush
 * replaces the first in the message (both stay counted until the ack, which puts the last one
 * in force: Entry.acknowledge).
 */
export function putLease(batch: LeaseBatch, grant: LeaseGrant): void {
  const earlier = batch.leases.findIndex((l) => l.resource === grant.resource)
  if (earlier < 0) return void batch.leases.push(grant)
  // What a replaced lease handed on (handover.ts, held-handover.ts) must still reach the client.
  const { inherit, handed } = batch.leases[earlier]!
  batch.leases.splice(earlier, 1)
  const keepInherit = inherit !== undefined && grant.inherit === undefined
  const keepHanded = handed !== undefined && grant.handed === undefined
  batch.leases.push(
    !keepInherit && !keepHanded
      ? grant
      : {
          ...grant,
          ...(keepInherit ? { inherit } : {}),
          ...(keepHanded ? { handed } : {}),
        },
  )
}

/** The batches made since the last flush, to send; the pool starts anew. */
export function flush(pool: PoolState): readonly LeaseBatch[] {
  if (pool.batches.size === 0) return noBatches
  const out = [...pool.batches.values()]
  pool.batches = new Map()
  return out
}
