import { createHmac, timingSafeEqual } from 'node:crypto'
import { safeFallback, type LeaseGrant, type LeaseProof } from '../../shared/index.js'
import type { LeaseBatch } from '../pool/index.js'

/** The holdings key: the current one signs; earlier ones still verify (rotation). */
export interface HoldingsKeys {
  readonly current: string
  readonly previous: readonly string[]
}

/** What a proof is bound to besides its own fields: who holds it, and of what. */
interface Binding {
  readonly tenant: string | undefined
  readonly clientId: string
  readonly resource: string
}

function mac(key: string, b: Binding, p: Omit<LeaseProof, 'mac'>): Buffer {
  // Length-prefixed fields: no two different inputs read the same.
  const fields = [
    'sluice-lease-proof-v2',
    b.tenant ?? '',
    b.clientId,
    b.resource,
    String(p.capacity),
    String(p.fallback),
    String(p.untilMs),
    String(p.fallbackUntilMs),
    String(p.issuedMs),
    String(p.gen),
  ]
  const h = createHmac('sha256', key)
  for (const f of fields) h.update(`${f.length}:${f}`)
  return h.digest()
}

/**
 * Signs a lease for `binding`, sent at `wallMs` with `graceMs` of grace:
 * the holder may enforce `capacity` until `untilMs`, then `fallback` until
 * `fallbackUntilMs`.
 */
export function signLease(
  keys: HoldingsKeys,
  binding: Binding,
  lease: LeaseGrant,
  wallMs: number,
  graceMs: number,
  gen = 0,
): LeaseProof {
  const untilMs = Math.ceil(wallMs + lease.ttlMs + graceMs)
  const body = {
    capacity: lease.capacity,
    // Never below 0 either: a safe capacity is a quantity (≥ 0), so the same value as before.
    fallback: safeFallback(lease),
    untilMs,
    fallbackUntilMs: untilMs + lease.safeHoldMs,
    issuedMs: Math.floor(wallMs),
    gen,
  }
  return { ...body, mac: mac(keys.current, binding, body).toString('base64url') }
}

/**
 * How much of a claimed holding a proof backs at `wallMs`: the signed
 * capacity before `untilMs`, the signed fallback before `fallbackUntilMs`,
 * else 0. A proof that does not verify under any key backs nothing.
 */
export function provenCapacity(
  keys: HoldingsKeys,
  binding: Binding,
  proof: LeaseProof | undefined,
  wallMs: number,
): { capacity: number; reason: 'proven' | 'expired' | 'missing' | 'forged' } {
  if (proof === undefined) return { capacity: 0, reason: 'missing' }
  const given = Buffer.from(proof.mac, 'base64url')
  const verifies = [keys.current, ...keys.previous].some((key) => {
    const expected = mac(key, binding, proof)
    return given.length === expected.length && timingSafeEqual(given, expected)
  })
  if (!verifies) return { capacity: 0, reason: 'forged' }
  if (wallMs < proof.untilMs) return { capacity: proof.capacity, reason: 'proven' }
  if (wallMs < proof.fallbackUntilMs) return { capacity: proof.fallback, reason: 'proven' }
  return { capacity: 0, reason: 'expired' }
}

/** Who a batch's client is, for the binding of its proofs; undefined when it is gone. */
export type BatchHolder = (
  clientKey: string,
) => { readonly tenant: string | undefined; readonly clientId: string | undefined } | undefined

/**
 * Signs every lease of `batches` at `wallMs`, in place (`lease.proof`), for
 * the client each batch goes to; `graceMsOf` gives a resource's grace.
 */
export function signBatches(
  keys: HoldingsKeys,
  batches: readonly LeaseBatch[],
  holderOf: BatchHolder,
  graceMsOf: (resource: string) => number,
  wallMs: number,
): void {
  for (const batch of batches) {
    const holder = holderOf(batch.clientKey)
    const clientId = holder?.clientId
    if (clientId === undefined) continue
    for (const lease of batch.leases) {
      const binding = { tenant: holder!.tenant, clientId, resource: lease.resource }
      lease.proof = signLease(keys, binding, lease, wallMs, graceMsOf(lease.resource), batch.seq)
    }
  }
}

/** A holding as a hello claims it. */
export interface ClaimedHolding {
  readonly resource: string
  readonly capacity: number
  readonly inFlight?: number | undefined
  readonly proof?: LeaseProof | undefined
}

/**
 * How much of a claimed holding counts: what its proof backs (never more
 * than claimed, slots in flight included), or 0 without a verifying proof,
 * or without a key to verify it with. `reason` says why a claim was cut to
 * nothing, for the log.
 */
export function provenHolding(
  keys: HoldingsKeys | undefined,
  holder: { readonly tenant: string | undefined; readonly clientId: string },
  h: ClaimedHolding,
  wallMs: number,
): {
  capacity: number
  claimed: number
  suspect: boolean
  issued: readonly [number, number] | undefined
} {
  const claimed = Math.max(h.capacity, h.inFlight ?? 0)
  if (keys === undefined) return { capacity: 0, claimed, suspect: false, issued: undefined }
  const binding = { tenant: holder.tenant, clientId: holder.clientId, resource: h.resource }
  const { capacity, reason } = provenCapacity(keys, binding, h.proof, wallMs)
  const suspect = reason === 'forged' || (reason === 'missing' && claimed > 0)
  const issued =
    reason === 'proven' && h.proof !== undefined
      ? ([h.proof.issuedMs, h.proof.gen] as const)
      : undefined
  return { capacity: Math.min(claimed, capacity), claimed, suspect, issued }
}
