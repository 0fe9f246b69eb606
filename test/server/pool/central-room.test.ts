import { describe, expect, it } from 'vitest'
import { CompiledConfig, parseConfig } from '../../../server/config/index.js'
import { Pool, centralClientId, type LeaseBatch } from '../../../server/pool/index.js'

/**
 * The room for one more of an uncrowded keyed quota, held by the coordinator's own part where
 * it is asked, and let go to a process that joins (server/pool/central-room.ts): the pool alone,
 * every lease acknowledged at once.
 */
const config = new CompiledConfig(
  parseConfig({
    resources: [
      { match: 'q/*', keyed: true, kind: 'quota', capacity: 90, window: '1h', refreshMs: 1000 },
    ],
  }),
)

function world(letGo: boolean) {
  const dropped: (string | undefined)[] = []
  const pool = new Pool(0, (id) => config.settingsFor(id), {
    track: true,
    learn: false,
    ...(letGo ? { letGoCentral: (_tenant, familyId) => void dropped.push(familyId) } : {}),
  })
  const sent: LeaseBatch[] = []
  const take = (out: readonly LeaseBatch[], nowMs: number): void => {
    for (const b of out) {
      sent.push(b)
      pool.acknowledge(b.clientKey, b.seq, undefined, nowMs)
    }
  }
  const period = (keys: readonly string[], nowMs: number): void => {
    for (const key of keys)
      take(
        pool.reportDemand(key, [{ resource: 'q/*', wants: 100, remote: true }], nowMs).batches,
        nowMs,
      )
    take(pool.roundMany(pool.familyIds('q/*'), nowMs), nowMs)
  }
  pool.connect('central', centralClientId, undefined, 'central-1', 0)
  for (const p of ['p', 'q']) pool.connect(p, p, undefined, `${p}-1`, 0)
  for (let t = 1000; t <= 4000; t += 1000) period(['central', 'p', 'q'], t)
  return { pool, sent, take, period, dropped }
}

describe("an uncrowded keyed quota's room, held by the coordinator's part", () => {
  it('is held by the part where it is asked, and kept free where the coordinator cannot let it go', () => {
    // Two processes and room for one more: a third each.
    const held = world(true)
    expect(held.pool.committedBy('central', 'q/*', 4000)).toBeCloseTo(1 / 3)
    expect(held.pool.committed('q/*', 4000)).toBeCloseTo(1)
    const kept = world(false)
    expect(kept.pool.committedBy('central', 'q/*', 4000)).toBe(0)
    expect(kept.pool.committed('q/*', 4000)).toBeCloseTo(2 / 3)
  })

  it('goes to a process that joins, with what the part spent of each key', () => {
    const w = world(true)
    const window = w.sent.flatMap((b) => b.leases).find((l) => l.resource === 'q/*')!.window!.index
    // The part admitted 7 of key a (reserved before its answers left).
    expect(w.pool.reserveSpend('central', 'q/*', window, [['a', 7]])).toBe(true)
    w.pool.takeChanges((ms) => ms)
    // A third process joins: nothing is free, so the part lets its room go to it at once.
    w.pool.connect('r', 'r', undefined, 'r-1', 5000)
    w.period(['p', 'q', 'r'], 5000)
    expect(w.dropped).toEqual(['q/*'])
    expect(w.pool.committedBy('central', 'q/*', 5000)).toBe(0)
    const toR = w.sent.filter((b) => b.clientKey === 'r').flatMap((b) => b.leases)
    const share = toR.find((l) => l.resource === 'q/*' && l.capacity > 0)!
    expect(share.capacity).toBeCloseTo(1 / 3)
    // With the units the part spent: r counts them spent of key a.
    expect(share.inherit?.keys).toEqual([['a', 7]])
  })
})
