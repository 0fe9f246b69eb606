import fc from 'fast-check'
import { describe, expect, it } from 'vitest'
import { provenCapacity, signLease } from '../../../server/coordinator/proofs.js'
import type { LeaseGrant } from '../../../shared/index.js'

const lease: LeaseGrant = {
  resource: 'api',
  kind: 'rate',
  capacity: 300,
  burst: 300,
  ttlMs: 1000,
  refreshMs: 100,
  safeCapacity: 100,
  safeHoldMs: 500,
}
const who = { tenant: 'a', clientId: 'c1', resource: 'api' }
const oldKey = 'the key we used until last week, 32+'
const newKey = 'the key we use from today onwards, 32+'

describe('lease proofs', () => {
  it('back the lease until ttl + grace, then the fallback until the hold ends, then nothing', () => {
    const keys = { current: newKey, previous: [] }
    const proof = signLease(keys, who, lease, 10_000, 200)
    expect(provenCapacity(keys, who, proof, 11_199)).toEqual({ capacity: 300, reason: 'proven' })
    expect(provenCapacity(keys, who, proof, 11_200)).toEqual({ capacity: 100, reason: 'proven' })
    expect(provenCapacity(keys, who, proof, 11_700)).toEqual({ capacity: 0, reason: 'expired' })
  })

  it('verify under an earlier key during a rotation, and not under a key that was dropped', () => {
    const proof = signLease({ current: oldKey, previous: [] }, who, lease, 0, 200)
    expect(provenCapacity({ current: newKey, previous: [oldKey] }, who, proof, 0).reason).toBe(
      'proven',
    )
    expect(provenCapacity({ current: newKey, previous: [] }, who, proof, 0).reason).toBe('forged')
  })

  it('bind the holder: another client, tenant or resource, or any changed field, does not verify', () => {
    const keys = { current: newKey, previous: [] }
    const proof = signLease(keys, who, lease, 0, 200)
    for (const other of [
      { ...who, clientId: 'c2' },
      { ...who, tenant: 'b' },
      { ...who, tenant: undefined },
      { ...who, resource: 'api2' },
    ])
      expect(provenCapacity(keys, other, proof, 0).reason).toBe('forged')
    fc.assert(
      fc.property(
        fc.constantFrom('capacity', 'fallback', 'untilMs', 'fallbackUntilMs' as const),
        fc.integer({ min: 1, max: 1e9 }),
        (field, delta) => {
          const tampered = { ...proof, [field]: proof[field] + delta }
          expect(provenCapacity(keys, who, tampered, 0)).toEqual({ capacity: 0, reason: 'forged' })
        },
      ),
    )
    expect(provenCapacity(keys, who, undefined, 0)).toEqual({ capacity: 0, reason: 'missing' })
  })
})
