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

describe("a restarted coordinator's part, when its predecessor's end is known", () => {
  /**
   * Six processes decide remotely (crowded): the coordinator's part holds the family's default
   * shares and the whole of hot key key/a. The ledger is restored by a new pool at 5,200 ms,
   * the dead process having ended at `endedMs` (a file ledger's lock records it); the new part
   * says hello, asks, and is leased at 5,300 ms. Returns its first leases of the family and of
   * the key.
   */
  function restart(endedMs: number | undefined) {
    const config = new CompiledConfig(
      parseConfig({
        resources: [{ match: 'key/*', keyed: true, kind: 'rate', capacity: 10, refreshMs: 1000 }],
      }),
    )
    const options = { learn: false, track: true }
    let pool = new Pool(0, (id) => config.settingsFor(id), options)
    const ledger = new MemoryLedger()
    const sent: LeaseBatch[] = []
    const take = (out: readonly LeaseBatch[], nowMs: number): void => {
      for (const b of out) {
        sent.push(b)
        // What an ack frees (a fall acknowledged: the rise it waited for) goes out too.
        take(pool.acknowledge(b.clientKey, b.seq, undefined, nowMs), nowMs)
      }
      ledger.write(pool.takeChanges((ms) => ms))
    }
    const period = (keys: readonly string[], nowMs: number): void => {
      for (const key of keys)
        take(
          pool.reportDemand(
            key,
            [
              { resource: 'key/*', wants: 100, remote: key !== 'central' },
              ...(key === 'central' ? [{ resource: 'key/a', wants: 40 }] : []),
            ],
            nowMs,
          ).batches,
          nowMs,
        )
      take(pool.roundMany([...pool.familyIds('key/*')], nowMs), nowMs)
    }
    const processes = ['p', 'q', 'r', 's', 't', 'u']
    const all = ['central', ...processes]
    pool.connect('central', centralClientId, undefined, 'central-1', 0)
    for (const p of processes) pool.connect(p, p, undefined, `${p}-1`, 0)
    for (let t = 1000; t <= 5000; t += 1000) period(all, t)
    // The family's own resource counts shares of every key (its capacity: the whole, 1).
    const familyCapacity = config.settingsFor('key/*')!.capacity
    const heldShare = pool.committedBy('central', 'key/*', 5000) / familyCapacity
    expect(heldShare).toBeGreaterThan(0.5)
    expect(pool.committedBy('central', 'key/a', 5000)).toBe(10)

    pool = new Pool(0, (id) => config.settingsFor(id), options)
    pool.restore(ledger.entries(), (ms) => ms, 5200, endedMs)
    // The processes come back first and report (as gateways reconnect before the part's first
    // remote ask); then the new part says hello, and everyone reports, the part last.
    for (const p of processes) pool.connect(p, p, undefined, `${p}-1`, 5200)
    period(processes, 5200)
    expect(pool.connect('central', centralClientId, undefined, 'central-2', 5250)).toBe('replaced')
    sent.length = 0
    take(pool.takeBatches(), 5250)
    // A round before the new part's first report: no part is there yet, so the processes are
    // the family's default holders by traffic (shapes/default-holders.ts); the dead part's share
    // still waits for the new part, not for one of them.
    take(pool.roundMany([...pool.familyIds('key/*')], 5260), 5260)
    for (let t = 5300; t <= 7300; t += 1000) period([...processes, 'central'], t)
    const first = (id: string) =>
      sent
        .filter((b) => b.clientKey === 'central')
        .flatMap((b) => b.leases)
        .find((l) => l.resource === id && l.capacity > 0)
    return { heldShare, family: first('key/*'), key: first('key/a'), pool }
  }

  it('hands the dead part’s shares to the new one with what they earned since that end, at most their burst', () => {
    // Ended 300 ms before the new part is leased: 0.3 of a refill (burst 10 at 10/s: 1 s).
    const recent = restart(5000)
    expect(recent.family?.handed?.level).toBeCloseTo(0.3 * recent.heldShare, 6)
    expect(recent.family?.capacity).toBeGreaterThanOrEqual(recent.heldShare - 1e-9)
    // The hot key's whole share, with 3 of its 10 tokens (`fill`: tokens, on a key's lease).
    expect(recent.key?.capacity).toBe(10)
    expect(recent.key?.fill).toBeCloseTo(3, 6)
    expect(recent.key?.fillWhole).toBe(true)
    // Ended 1.3 s before: a whole refill, so full; never more than the burst.
    const long = restart(4000)
    expect(long.family?.handed?.level).toBeCloseTo(long.heldShare, 6)
    expect(long.key?.fill).toBeCloseTo(10, 6)
    // The share moved, it was not doubled: once the new part acknowledged it, the dead part's
    // counts no more (the pool's model test holds the tokens to one central bucket).
    expect(long.pool.committed('key/*', 7300)).toBeLessThanOrEqual(1 + 1e-9)
    expect(long.pool.committed('key/a', 7300)).toBeLessThanOrEqual(10 + 1e-9)
  })

  it('hands nothing when the end is not known: the new part’s buckets start empty, as before', () => {
    const unknown = restart(undefined)
    // Leased the family again, within the periods, with nothing handed.
    expect(unknown.family?.capacity).toBeGreaterThan(0)
    expect(unknown.family?.handed).toBeUndefined()
    expect(unknown.key?.fill ?? 0).toBe(0)
  })
})
