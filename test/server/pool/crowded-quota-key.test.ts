import { describe, expect, it } from 'vitest'
import { CompiledConfig, parseConfig } from '../../../server/config/index.js'
import { Pool, centralClientId, type LeaseBatch } from '../../../server/pool/index.js'

/**
 * A crowded keyed quota's hot key (server/pool/shapes/named-quota.ts `quotaBlocks`): the
 * processes the coordinator's own part decides for get no block of it, and that part holds the
 * rest of the key's budget, as one central counter would.
 */
function crowded(processes: readonly string[], window = '1h') {
  const config = new CompiledConfig(
    parseConfig({
      resources: [
        { match: 'q/*', keyed: true, kind: 'quota', capacity: 100, window, refreshMs: 1000 },
      ],
    }),
  )
  const pool = new Pool(0, (id) => config.settingsFor(id), { learn: false })
  const take = (out: readonly LeaseBatch[], nowMs: number): void => {
    for (const b of out) pool.acknowledge(b.clientKey, b.seq, undefined, nowMs)
  }
  const windowMs = window === '1h' ? 3_600_000 : 20_000
  pool.connect('central', centralClientId, undefined, 'central-1', 0)
  for (const p of processes) pool.connect(p, p, undefined, `${p}-1`, 0)
  /** Every process reports the family (deciding remotely); the coordinator's part asks q/a at `wants`. */
  const period = (nowMs: number, wants: number): void => {
    for (const p of processes)
      take(
        pool.reportDemand(p, [{ resource: 'q/*', wants: 10, remote: true }], nowMs).batches,
        nowMs,
      )
    take(
      pool.reportDemand(
        'central',
        [
          { resource: 'q/*', wants: 10, remote: true },
          { resource: 'q/a', wants, used: 0, window: Math.floor(nowMs / windowMs) },
        ],
        nowMs,
      ).batches,
      nowMs,
    )
    take(pool.roundMany(pool.familyIds('q/*'), nowMs), nowMs)
  }
  return { pool, period, take }
}

describe("a crowded keyed quota's hot key", () => {
  it("is the coordinator's part's to hold, all of what is left: the processes it decides for hold none", () => {
    const processes = ['p', 'q', 'r', 's', 't', 'u']
    const { pool, period } = crowded(processes)
    // Asked now and then (0.1/s): sized by its demand alone, its block would be a unit or two.
    for (let t = 1000; t <= 6000; t += 1000) period(t, 0.1)
    expect(pool.hotKeyCount('q/*')).toBe(1)
    for (const p of processes) expect(pool.committedBy(p, 'q/a', 6000), p).toBe(0)
    expect(pool.committedBy('central', 'q/a', 6000)).toBe(100)
  })

  it('goes into the next window with the block sent ahead, not a lease of 0, when the family’s lease goes first', () => {
    const processes = ['p', 'q', 'r', 's', 't', 'u']
    const { pool, period, take } = crowded(processes, '20s')
    for (let t = 1000; t <= 19_000; t += 1000) period(t, 10)
    // Just before the edge each lease goes again with its block of the next window (ahead.ts).
    const renewed = pool.renewEdges(pool.familyIds('q/*'), 19_900)
    const ahead = renewed
      .filter((b) => b.clientKey === 'central')
      .flatMap((b) => b.leases)
      .find((l) => l.resource === 'q/a')
    expect(ahead?.window?.next?.capacity).toBe(100)
    take(renewed, 19_900)
    // At the edge the family's round goes first (with ~730 hot keys, their own rounds came up to
    // a second later): the key's lease it carries for the new window is the block, not 0.
    const sent = pool
      .round('q/*', 20_001)
      .filter((b) => b.clientKey === 'central')
      .flatMap((b) => b.leases)
      .filter((l) => l.resource === 'q/a')
    expect(sent.length).toBeGreaterThan(0)
    for (const l of sent) {
      expect(l.window?.index).toBe(1)
      expect(l.capacity).toBe(100)
    }
  })
})
