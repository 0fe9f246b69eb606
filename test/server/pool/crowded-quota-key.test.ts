import { describe, expect, it } from 'vitest'
import { CompiledConfig, parseConfig } from '../../../server/config/index.js'
import { Pool, centralClientId, type LeaseBatch } from '../../../server/pool/index.js'

/**
 * A crowded keyed quota's hot key (server/pool/shapes/named-quota.ts `quotaBlocks`): the
 * processes the coordinator's own part decides for get no block of it, and that part holds the
 * rest of the key's budget, as one central counter would.
 */
function crowded(processes: readonly string[]) {
  const config = new CompiledConfig(
    parseConfig({
      resources: [
        { match: 'q/*', keyed: true, kind: 'quota', capacity: 100, window: '1h', refreshMs: 1000 },
      ],
    }),
  )
  const pool = new Pool(0, (id) => config.settingsFor(id), { learn: false })
  const take = (out: readonly LeaseBatch[], nowMs: number): void => {
    for (const b of out) pool.acknowledge(b.clientKey, b.seq, undefined, nowMs)
  }
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
          { resource: 'q/a', wants, used: 0, window: 0 },
        ],
        nowMs,
      ).batches,
      nowMs,
    )
    take(pool.roundMany(pool.familyIds('q/*'), nowMs), nowMs)
  }
  return { pool, period }
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
})
