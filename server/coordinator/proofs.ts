import { createHmac, timingSafeEqual } from 'node:crypto'
import type { LeaseGrant, LeaseProof } from '../../shared/index.js'

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
    'sluice-lease-proof-v1',
    b.tenant ?? '',
    b.clientId,
    b.resource,
    String(p.capacity),
    String(p.fallback),
    String(p.untilMs),
    String(p.fallbackUntilMs),
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
): LeaseProof {
  const untilMs = Math.ceil(wallMs + lease.ttlMs + graceMs)
  const body = {
    capacity: lease.capacity,
    fallback: Math.min(lease.safeCapacity, lease.capacity),
    untilMs,
    fallbackUntilMs: untilMs + lease.safeHoldMs,
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
