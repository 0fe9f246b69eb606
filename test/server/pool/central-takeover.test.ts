import { describe, expect, it } from 'vitest'
import { CompiledConfig, parseConfig } from '../../../server/config/index.js'
import { Pool, centralClientId, type LeaseBatch } from '../../../server/pool/index.js'

/**
 * The coordinator's own part taken over by a new one (a coordinator restarted from its ledger,
 * or a part that failed): the old one admits nothing any more, so its rate leases are freed at
 * once, not counted apart until they lapse (server/pool/clients.ts `freeDeadCentral`); a
 * keyed quota's share is handed on less what the dead part reserved (central-spend.test.ts),
 * and counts until an heir has it.
 */
function world() {
  const config = new CompiledConfig(
    parseConfig({
      resources: [
        { match: 'key/*', keyed: true, kind: 'rate', capacity: 10, refreshMs: 1000 },
        { match: 'q/*', keyed: true, kind: 'quota', capacity: 100, window: '1h', refreshMs: 1000 },
      ],
    }),
  )
  const pool = new Pool(0, (id) => config.settingsFor(id), { learn: false })
  const sent: LeaseBatch[] = []
  const take = (out: readonly LeaseBatch[], nowMs: number): void => {
    for (const b of out) {
      sent.push(b)
      pool.acknowledge(b.clientKey, b.seq, undefined, nowMs)
    }
  }
  /**
   * Each of `keys` reports the families (deciding remotely) and key/a (rate, hot) and q/* (a
   * quota), then a round of each.
   */
  const period = (keys: readonly string[], nowMs: number): void => {
    for (const key of keys)
      take(
        pool.reportDemand(
          key,
          [
            { resource: 'key/*', wants: 100, remote: true },
            { resource: 'key/a', wants: 40 },
            { resource: 'q/*', wants: 100, remote: true },
          ],
          nowMs,
        ).batches,
        nowMs,
      )
    take(pool.roundMany([...pool.familyIds('key/*'), ...pool.familyIds('q/*')], nowMs), nowMs)
  }
  return { pool, sent, take, period }
}

describe("the coordinator's own part taken over", () => {
  it('frees the dead part’s rate leases at once, leases them to the new part within a round, and keeps its quota share counted until handed on', () => {
    const { pool, take, period } = world()
    // Six processes deciding remotely: the family is crowded, the coordinator's part holds their
    // default shares (shapes/default-holders.ts) and a part of the hot key.
    const processes = ['p', 'q', 'r', 's', 't', 'u']
    pool.connect('central', centralClientId, undefined, 'central-1', 0)
    for (const p of processes) pool.connect(p, p, undefined, `${p}-1`, 0)
    const all = ['central', ...processes]
    for (let t = 1000; t <= 5000; t += 1000) period(all, t)
    const held = {
      family: pool.committedBy('central', 'key/*', 5000),
      key: pool.committedBy('central', 'key/a', 5000),
      quota: pool.committedBy('central', 'q/*', 5000),
    }
    expect(held.family).toBeGreaterThan(0)
    // The whole key: the processes are decided centrally.
    expect(held.key).toBe(10)
    expect(held.quota).toBeGreaterThan(0)
    const quotaBefore = pool.committed('q/*', 5000)

    // A new coordinator's part (another instance) says hello: the old one is dead.
    pool.disconnect('central', 5100)
    expect(pool.connect('central', centralClientId, undefined, 'central-2', 5200)).toBe('replaced')
    // Its rate leases no longer count: what is committed of the family and the key is the others'.
    const others = (id: string): number =>
      processes.reduce((sum, p) => sum + pool.committedBy(p, id, 5200), 0)
    expect(pool.committed('key/*', 5200)).toBeCloseTo(others('key/*'), 9)
    expect(pool.committed('key/a', 5200)).toBeCloseTo(others('key/a'), 9)
    // Its quota share counts until an heir acknowledges it (central-spend.test.ts).
    expect(pool.committed('q/*', 5200)).toBeCloseTo(quotaBefore, 9)
    // Whatever the freeing granted on (rises of holders that waited: none here, the others are
    // decided centrally) is left for the hello to send.
    take(pool.takeBatches(), 5200)
    expect(pool.takeBatches()).toHaveLength(0)
    // The new part asks, and is leased within a round: nothing waits for a lapse.
    period(all, 5300)
    expect(pool.committedBy('central', 'key/*', 5300)).toBeGreaterThan(0)
    expect(pool.committedBy('central', 'key/a', 5300)).toBe(10)
  })

  it('keeps another process’s leases counting until they lapse when its id is taken over', () => {
    const { pool, period } = world()
    pool.connect('p', 'p', undefined, 'p-1', 0)
    pool.connect('q', 'q', undefined, 'q-1', 0)
    for (let t = 1000; t <= 5000; t += 1000) period(['p', 'q'], t)
    const family = pool.committed('key/*', 5000)
    const key = pool.committed('key/a', 5000)
    pool.disconnect('p', 5100)
    // The old p may still be running (a process that lost its connection): its leases count.
    expect(pool.connect('p', 'p', undefined, 'p-2', 5200)).toBe('replaced')
    expect(pool.committed('key/*', 5200)).toBeCloseTo(family, 9)
    expect(pool.committed('key/a', 5200)).toBeCloseTo(key, 9)
  })
})
