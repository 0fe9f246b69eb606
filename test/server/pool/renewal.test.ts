import { describe, expect, it } from 'vitest'
import { Pool } from '../../../server/pool/index.js'
import { resourceSettings } from '../../helpers/settings.js'

/**
 * When a report renews a lease. Clients whose first leases came in one burst
 * (a coordinator start, a mass reconnect) must not renew in step for good:
 * with one fixed point in the lease's life they did, and 10,000 clients
 * renewed in waves (docs/benchmarks.md, Renewals spread).
 */

const ttlMs = 10_000
const api = resourceSettings({
  id: 'api',
  capacity: 1_000_000,
  burst: 1_000_000,
  leaseTtlMs: ttlMs,
})

/** `clients` clients leased in the same round at 0; each one's renewal time (ms after its lease). */
function renewalTimes(clients: number, stepMs: number): number[] {
  const pool = new Pool(0, (id) => (id === 'api' ? api : undefined))
  for (let i = 0; i < clients; i++) {
    pool.connect(`c${i}`, `c${i}`, undefined, `inst-${i}`, 0)
    pool.reportDemand(`c${i}`, [{ resource: 'api', wants: 10 }], 0)
  }
  for (const b of pool.round('api', 0)) pool.acknowledge(b.clientKey, b.seq, undefined, 0)
  const renewedAt = new Array<number>(clients).fill(NaN)
  for (let t = stepMs; t <= ttlMs; t += stepMs)
    for (let i = 0; i < clients; i++) {
      if (!Number.isNaN(renewedAt[i])) continue
      const { batches } = pool.reportDemand(`c${i}`, [{ resource: 'api', wants: 10 }], t)
      if (batches.length > 0) renewedAt[i] = t
    }
  return renewedAt
}

describe('renewals', () => {
  it('come between a third and a half of the lease’s life, never before', () => {
    const times = renewalTimes(200, 10)
    for (const t of times) {
      expect(t).toBeGreaterThanOrEqual(ttlMs / 3)
      expect(t).toBeLessThanOrEqual(ttlMs / 2 + 10)
    }
  })

  it('of clients leased in the same round are spread over that span, not all at one point', () => {
    const times = renewalTimes(200, 10)
    // Ten bins across the span from a third to a half: every one holds some, none most.
    const bins = new Array<number>(10).fill(0)
    for (const t of times) {
      const at = (t - ttlMs / 3) / (ttlMs / 2 - ttlMs / 3)
      bins[Math.min(9, Math.floor(at * 10))]!++
    }
    for (const n of bins) {
      expect(n).toBeGreaterThan(5)
      expect(n).toBeLessThan(40)
    }
  })
})
