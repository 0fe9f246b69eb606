import { describe, expect, it } from 'vitest'
import { Pool } from '../../../server/pool/index.js'
import { blockSec } from '../../../server/pool/shapes/named-quota.js'
import { resourceSettings } from '../../helpers/settings.js'

/**
 * A quota's block lasts until the next lease can come: a refresh period's renewal and the
 * round trip of the client's link. A block of two periods alone ran dry for half of every
 * renewal with a 0.8 s round trip and 250 ms periods (~40% of what was asked admitted:
 * docs/benchmarks.md).
 */

const refreshMs = 250
const settings = resourceSettings({
  id: 'q',
  kind: 'quota',
  // A standing block of 10 (quotaStandingBlock): below what either client asks.
  capacity: 100_000,
  burst: 100_000,
  refreshMs,
  leaseTtlMs: 5000,
  safeCapacity: 0,
  safeHoldMs: 0,
  quotaWindow: { kind: 'fixed', ms: 60_000 },
})

/**
 * Each client's block (its budget less what it used) after spending `perSec` a second for 2 s,
 * reporting every refresh period, by its round trip.
 */
function blocks(rtts: readonly (number | undefined)[], perSec: number): number[] {
  const pool = new Pool(0, () => settings, { learn: false })
  const keys = rtts.map((_, i) => `c${i}`)
  for (const key of keys) pool.connect(key, key, undefined, `inst-${key}`, 0)
  const budget = new Array<number>(keys.length).fill(0)
  const take = (
    batches: readonly { clientKey: string; seq: number; leases: readonly { capacity: number }[] }[],
    t: number,
  ) => {
    for (const b of batches) {
      pool.acknowledge(b.clientKey, b.seq, undefined, t)
      for (const l of b.leases) budget[keys.indexOf(b.clientKey)] = l.capacity
    }
  }
  let used = 0
  for (let t = 0; t <= 2000; t += refreshMs) {
    for (const [i, key] of keys.entries()) {
      const report = { resource: 'q', wants: perSec, used, window: 0 }
      take(pool.reportDemand(key, [report], t, undefined, rtts[i]).batches, t)
    }
    take(pool.round('q', t), t)
    used += (perSec * refreshMs) / 1000
  }
  return budget.map((b) => b - (used - (perSec * refreshMs) / 1000))
}

describe('a quota block', () => {
  it('is sized for two refresh periods and the link’s round trip, capped at eight periods of it', () => {
    expect(blockSec(60_000, 2 * refreshMs, 0, refreshMs)).toBe(0.5)
    expect(blockSec(60_000, 2 * refreshMs, 800, refreshMs)).toBe(1.3)
    // A client that answers its pings late asks for at most eight periods more.
    expect(blockSec(60_000, 2 * refreshMs, 60_000, refreshMs)).toBe(2.5)
    // Never past the window's end.
    expect(blockSec(300, 2 * refreshMs, 800, refreshMs)).toBe(0.3)
  })

  it('of a client far from the coordinator lasts its round trip longer than a near one’s', () => {
    const [near, far, unknown] = blocks([0, 800, undefined], 100)
    // 100 a second over 0.5 s, and over 0.5 + 0.8 s: what each asks until its next lease.
    expect(near).toBeGreaterThanOrEqual(50)
    expect(near).toBeLessThan(60)
    expect(far).toBeGreaterThanOrEqual(130)
    expect(far).toBeLessThan(140)
    // A client whose round trip is not known yet is sized as a near one.
    expect(unknown).toBe(near)
  })
})
