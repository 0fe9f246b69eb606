import { describe, expect, it } from 'vitest'
import { CompiledConfig, parseConfig } from '../../../server/config/index.js'
import { MemoryLedger } from '../../../server/ledger/index.js'
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

describe("a keyed quota's coordinator part taken over, at the next window", () => {
  it('holds nothing of the next window by the dead part’s leases of the one before: the new part has a hot key’s whole budget at the edge', () => {
    const config = new CompiledConfig(
      parseConfig({
        resources: [
          {
            match: 'q/*',
            keyed: true,
            kind: 'quota',
            capacity: 100,
            window: '20s',
            refreshMs: 1000,
            leaseTtlMs: 3000,
          },
        ],
      }),
    )
    // A file ledger's leases may leave up to its longest write after they are made: each is
    // counted from then (lease-out.ts), a quota's past its window's end by as much.
    const options = { learn: false, track: true, sendDelayMs: 1500 }
    let pool = new Pool(0, (id) => config.settingsFor(id), { ...options })
    const ledger = new MemoryLedger()
    const take = (out: readonly LeaseBatch[], nowMs: number): void => {
      for (const b of out) pool.acknowledge(b.clientKey, b.seq, undefined, nowMs)
      ledger.write(pool.takeChanges((ms) => ms))
    }
    const processes = ['p', 'q', 'r', 's', 't', 'u']
    const all = ['central', ...processes]
    // The processes decide remotely (crowded): the part holds the family and the hot key q/a,
    // and says what it spent of it (`used`).
    const period = (keys: readonly string[], nowMs: number, used = 0): void => {
      for (const key of keys)
        take(
          pool.reportDemand(
            key,
            [
              { resource: 'q/*', wants: 100, remote: key !== 'central' },
              ...(key === 'central'
                ? [{ resource: 'q/a', wants: 200, used, window: Math.floor(nowMs / 20_000) }]
                : []),
            ],
            nowMs,
          ).batches,
          nowMs,
        )
      take(pool.roundMany(['q/*', ...pool.familyIds('q/*')], nowMs), nowMs)
    }
    pool.connect('central', centralClientId, undefined, 'central-1', 0)
    for (const p of processes) pool.connect(p, p, undefined, `${p}-1`, 0)
    for (let t = 1000; t <= 15_000; t += 1000) period(all, t)
    // It admitted 92 of the key, written as reserved before its answers left (central-spend.ts).
    expect(pool.reserveSpend('central', 'q/*', 0, [['a', 92]])).toBe(true)
    period(all, 16_000, 92)
    expect(pool.committedBy('central', 'q/a', 16_000)).toBe(100)
    ledger.write(pool.takeChanges((ms) => ms))
    // The coordinator dies 3 s before the window's end; its successor restores the ledger, the
    // processes come back, and its part says hello. What the dead part spent of this window
    // stays spent.
    pool = new Pool(0, (id) => config.settingsFor(id), { ...options })
    pool.restore(ledger.entries(), (ms) => ms, 17_050)
    for (const p of processes) pool.connect(p, p, undefined, `${p}-1`, 17_100)
    expect(pool.connect('central', centralClientId, undefined, 'central-2', 17_100)).toBe(
      'replaced',
    )
    for (let t = 17_500; t < 20_000; t += 500) period(all, t)
    expect(pool.committedBy('central', 'q/a', 19_500)).toBeLessThanOrEqual(8)
    // The next window: the dead part, dead before it opened, spent nothing of it. Its lease of
    // the window before holds none of this one (counted on for its safe hold, the new part was
    // leased 8 of a hot key's 100 for 1.7 s after the edge: #41, a keyed quota through a
    // coordinator restart, 30 gateways).
    period(all, 20_050)
    expect(pool.committedBy('central', 'q/a', 20_050)).toBe(100)
    expect(pool.committed('q/a', 20_050)).toBe(100)
  })
})
