import { describe, expect, it } from 'vitest'
import { CompiledConfig, parseConfig } from '../../../server/config/index.js'
import { domainLimits } from '../../../shared/index.js'
import { MemoryLedger } from '../../../server/ledger/index.js'
import type { LedgerChange, LedgerEntry } from '../../../server/ledger/index.js'
import { Pool, centralClientId, type LeaseBatch } from '../../../server/pool/index.js'
import { reserveShardId, reserveShardOf } from '../../../server/pool/central-spend.js'

/**
 * A keyed quota's share of the coordinator's own part, taken over (a coordinator restarted
 * from its ledger, or a part that failed): the dead part wrote, before each answer, what it
 * admitted of each key (server/pool/central-spend.ts), so its share is handed on less that, as
 * a clean close hands a share on (handover.ts), and its keys leased on their own keep only
 * what it reserved. A part that cannot vouch for what it spent keeps its share spent.
 */
const config = new CompiledConfig(
  parseConfig({
    resources: [
      { match: 'q/*', keyed: true, kind: 'quota', capacity: 100, window: '1h', refreshMs: 1000 },
    ],
  }),
)
const processes = ['p', 'q', 'r', 's', 't', 'u']

function world(pool = new Pool(0, (id) => config.settingsFor(id), { track: true, learn: false })) {
  const sent: LeaseBatch[] = []
  const take = (out: readonly LeaseBatch[], nowMs: number): void => {
    for (const b of out) {
      sent.push(b)
      pool.acknowledge(b.clientKey, b.seq, undefined, nowMs)
    }
  }
  /** Every process asks the family remotely; the central part asks key a too (hot at it). */
  const period = (nowMs: number, window?: number): void => {
    for (const key of ['central', ...processes])
      take(
        pool.reportDemand(
          key,
          [
            { resource: 'q/*', wants: 100, remote: true },
            ...(key === 'central' && window !== undefined
              ? [{ resource: 'q/a', wants: 50, used: 0, window }]
              : []),
          ],
          nowMs,
        ).batches,
        nowMs,
      )
    take(pool.roundMany(pool.familyIds('q/*'), nowMs), nowMs)
  }
  const leasesTo = (key: string, resource: string) =>
    sent
      .filter((b) => b.clientKey === key)
      .flatMap((b) => b.leases.filter((l) => l.resource === resource))
  return { pool, sent, take, period, leasesTo }
}

/** A crowded family whose central part holds the processes' default shares, and key a on its own. */
function crowded() {
  const w = world()
  w.pool.connect('central', centralClientId, undefined, 'central-1', 0)
  for (const p of processes) w.pool.connect(p, p, undefined, `${p}-1`, 0)
  for (let t = 1000; t <= 3000; t += 1000) w.period(t)
  const window = w.leasesTo('central', 'q/*').at(-1)!.window!.index
  for (let t = 4000; t <= 6000; t += 1000) w.period(t, window)
  return { ...w, window }
}

/**
 * A coordinator restarted from `entries` (the pool restored at 6.5 s, every process and a new
 * central part connected, two periods): what it had committed of the family when restored (the
 * dead part's share among it), and the share handed to the new part with the dead one's spent keys, if any was.
 */
function handedFrom(entries: readonly LedgerEntry[]) {
  const restarted = world(
    new Pool(0, (id) => config.settingsFor(id), { track: true, learn: false }),
  )
  restarted.pool.restore(entries, (ms) => ms, 6500)
  const restored = restarted.pool.committed('q/*', 6500)
  const deadShare = restarted.pool.committedBy('central', 'q/*', 6500)
  restarted.pool.connect('central', centralClientId, undefined, 'central-2', 6600)
  for (const p of processes) restarted.pool.connect(p, p, undefined, `${p}-2`, 6600)
  restarted.period(7000)
  restarted.period(8000)
  const handed = restarted.leasesTo('central', 'q/*').find((l) => l.inherit !== undefined)
  return { handed, restarted, restored, deadShare }
}

describe("a keyed quota's share of the coordinator's own part, taken over", () => {
  it('is handed on less what the dead part reserved, and its key leased on its own keeps only that', () => {
    const { pool, period, leasesTo, window } = crowded()
    const share = pool.committedBy('central', 'q/*', 6000)
    expect(share).toBeGreaterThan(0)
    expect(pool.committedBy('central', 'q/a', 6000)).toBeGreaterThan(20)
    // It answered 7 of b admitted by its default share, 12 of a by a's own lease.
    expect(
      pool.reserveSpend('central', 'q/*', window, [
        ['b', 7],
        ['a', 12],
      ]),
    ).toBe(true)

    pool.disconnect('central', 6100)
    expect(pool.connect('central', centralClientId, undefined, 'central-2', 6200)).toBe('replaced')
    // a: the dead part's lease counts what it reserved, no more.
    expect(pool.committed('q/a', 6200)).toBeCloseTo(12, 9)
    period(6300)
    period(7300)
    // The share went to the new part (it held nothing: the heir at once), with b's 7 spent.
    const handed = leasesTo('central', 'q/*').find((l) => l.inherit !== undefined)
    expect(handed?.inherit?.keys).toEqual([['b', 7]])
    expect(handed!.capacity).toBeGreaterThanOrEqual(share - 1e-9)
    // The dead part's share no longer counts beside it.
    expect(pool.committed('q/*', 7300)).toBeLessThanOrEqual(1 + 1e-9)
  })

  it('is handed on through the ledger: a coordinator restarted from it frees what was not reserved', () => {
    const { pool, window } = crowded()
    const ledger = new MemoryLedger()
    pool.reserveSpend('central', 'q/*', window, [['b', 7]])
    ledger.write(pool.takeChanges((ms) => ms))
    const written = ledger.entries().find((e) => e.clientKey === 'central' && e.resource === 'q/*')
    expect(written?.reservedIn).toBe('shards')
    const shard = reserveShardId('q/*', window, reserveShardOf('b'))
    const inShard = ledger.entries().find((e) => e.clientKey === 'central' && e.resource === shard)
    expect(inShard?.reserved).toEqual([{ window, keys: [['b', 7]] }])
    expect(inShard?.commitments).toEqual([])

    const { handed, restarted, deadShare } = handedFrom(ledger.entries())
    expect(deadShare).toBeGreaterThan(0)
    expect(handed?.inherit?.keys).toEqual([['b', 7]])
    // a, never reserved: nothing of it is counted spent by the dead part.
    expect(restarted.pool.committed('q/a', 8000)).toBeLessThanOrEqual(100)
  })

  /**
   * A restart from the crowded family's ledger (the dead part reserved b's 7) in which the
   * processes come back first, each reporting `wants` (0: nothing checked yet; more: checked
   * here, not asking the coordinator), and a round runs before the new part comes, as the
   * processes of the efficiency bench reconnect faster than the coordinator's part is made.
   */
  function processesBackFirst(wants: number) {
    const { pool, window } = crowded()
    const ledger = new MemoryLedger()
    pool.reserveSpend('central', 'q/*', window, [['b', 7]])
    ledger.write(pool.takeChanges((ms) => ms))
    const restarted = world(
      new Pool(0, (id) => config.settingsFor(id), { track: true, learn: false }),
    )
    restarted.pool.restore(ledger.entries(), (ms) => ms, 6500)
    for (const p of processes) {
      restarted.pool.connect(p, p, undefined, `${p}-2`, 6600)
      restarted.take(
        restarted.pool.reportDemand(p, [{ resource: 'q/*', wants }], 6650).batches,
        6650,
      )
    }
    restarted.take(restarted.pool.roundMany(restarted.pool.familyIds('q/*'), 6700), 6700)
    restarted.pool.connect('central', centralClientId, undefined, 'central-2', 6800)
    /** The new part asks, a round runs (the processes not heard from again). */
    const partAsks = (t: number): void => {
      restarted.take(
        restarted.pool.reportDemand('central', [{ resource: 'q/*', wants: 100, remote: true }], t)
          .batches,
        t,
      )
      restarted.take(restarted.pool.roundMany(restarted.pool.familyIds('q/*'), t), t)
    }
    /** The share went to the new part with b's 7 spent, to no process. */
    const expectHandedToPart = (): void => {
      const handed = restarted.leasesTo('central', 'q/*').find((l) => l.inherit !== undefined)
      expect(handed?.inherit?.keys).toEqual([['b', 7]])
      for (const p of processes)
        expect(restarted.leasesTo(p, 'q/*').filter((l) => l.inherit !== undefined)).toEqual([])
    }
    return { restarted, partAsks, expectHandedToPart }
  }

  it('goes to the new part, not to a process restored but not heard from yet (the first round before the part came)', () => {
    // The dead part's share went to a process not heard from yet (#41, a keyed quota over 30
    // gateways: the new part held a 31st of the family to the window's end, and each key
    // nobody had asked of it was refused).
    const { partAsks, expectHandedToPart } = processesBackFirst(0)
    for (let t = 7000; t <= 12_000; t += 1000) partAsks(t)
    expectHandedToPart()
  })

  it('goes to the new part, not to a process that checked here after the restart (the split by traffic then)', () => {
    // A process that checked here before the new part came makes the split go by traffic: the
    // dead part's share went to one of them, and the new part held nothing of the family to the
    // window's end and after (#41). Then the processes say they ask the coordinator.
    const { restarted, partAsks, expectHandedToPart } = processesBackFirst(5)
    partAsks(6900)
    for (let t = 7000; t <= 12_000; t += 1000) restarted.period(t)
    expectHandedToPart()
  })

  it('stays spent when the dead part cannot vouch for what it spent', () => {
    // A ledger written by a part that did not reserve (no `reserved`): spent to the window's end.
    {
      const { pool } = crowded()
      const ledger = new MemoryLedger()
      ledger.write(pool.takeChanges((ms) => ms))
      const entries = ledger.entries().map((e) => {
        if (e.clientKey !== 'central' || e.resource !== 'q/*') return e
        const { reservedIn, ...rest } = e
        expect(reservedIn).toBe('shards')
        return rest
      })
      const { handed, restarted, restored } = handedFrom(entries)
      expect(handed).toBeUndefined()
      expect(restarted.pool.committed('q/*', 8000)).toBeGreaterThanOrEqual(restored - 1e-9)
    }
    // Units reserved of the next window while a block of it sent ahead is held (the last
    // moments of a window): the release would free the block, so it stays spent.
    {
      const { pool, window, leasesTo, take, period } = crowded()
      const endMs = 3_600_000
      take(pool.renewEdges(pool.familyIds('q/*'), endMs - 50), endMs - 50)
      expect(leasesTo('central', 'q/*').at(-1)?.window?.next).toBeDefined()
      const share = pool.committedBy('central', 'q/*', endMs - 50)
      pool.reserveSpend('central', 'q/*', window + 1, [['b', 1]])
      pool.connect('central', centralClientId, undefined, 'central-2', endMs - 40)
      period(endMs - 30)
      period(endMs - 20)
      expect(leasesTo('central', 'q/*').some((l) => l.inherit !== undefined)).toBe(false)
      expect(pool.committed('q/*', endMs - 20)).toBeGreaterThanOrEqual(share - 1e-9)
    }
  })

  it('keeps the reservation of the window in force when the two after it are reserved ahead', () => {
    // The part's budget of the next window in force a few ms before the coordinator's edge: it
    // reserves the window after that ahead, and the one in force here must stay.
    const { pool, window, leasesTo, period } = crowded()
    pool.reserveSpend('central', 'q/*', window, [['b', 5]])
    pool.reserveSpend('central', 'q/*', window + 1, [['b', 2]])
    pool.reserveSpend('central', 'q/*', window + 2, [['b', 2]])
    pool.connect('central', centralClientId, undefined, 'central-2', 6200)
    period(6300)
    period(7300)
    const handed = leasesTo('central', 'q/*').find((l) => l.inherit !== undefined)
    expect(handed?.inherit?.keys).toEqual([['b', 5]])
  })

  it('is handed on with units reserved of the next window ahead of its checks, no block of it held', () => {
    const { pool, window, leasesTo, period } = crowded()
    pool.reserveSpend('central', 'q/*', window, [['b', 2]])
    pool.reserveSpend('central', 'q/*', window + 1, [
      ['b', 4],
      ['c', 4],
    ])
    pool.connect('central', centralClientId, undefined, 'central-2', 6200)
    period(6300)
    period(7300)
    const handed = leasesTo('central', 'q/*').find((l) => l.inherit !== undefined)
    expect(handed?.inherit?.keys).toEqual([['b', 2]])
  })

  describe('in the ledger, in shards', () => {
    const keys = (n: number): [string, number][] =>
      Array.from({ length: n }, (_, i) => [`k${i}`, 1 + (i % 7)])

    it('writes only the shards of the keys raised, not every key of the window', () => {
      const { pool, window } = crowded()
      const ledger = new MemoryLedger()
      pool.reserveSpend('central', 'q/*', window, keys(1000))
      ledger.write(pool.takeChanges((ms) => ms))
      const b = reserveShardOf('k5')
      // k5 raised (and k3 not: it already holds 4).
      pool.reserveSpend('central', 'q/*', window, [
        ['k5', 50],
        ['k3', 2],
      ])
      const changes = pool.takeChanges((ms) => ms)
      expect(changes).toHaveLength(1)
      const put = 'put' in changes[0]! ? changes[0].put : undefined
      expect(put?.resource).toBe(reserveShardId('q/*', window, b))
      const written = new Map(put!.reserved![0]!.keys)
      expect(written.get('k5')).toBe(50)
      expect([...written.keys()].every((k) => reserveShardOf(k) === b)).toBe(true)
      // A shard of 1,000 keys in 64: tens of them, not a thousand.
      expect(written.size).toBeLessThan(60)
      ledger.write(changes)
      // What the ledger holds says every key's count: the handover counts each spent.
      const { handed } = handedFrom(ledger.entries())
      const spent = new Map(handed!.inherit!.keys)
      expect(spent.size).toBe(1000)
      expect(spent.get('k5')).toBe(50)
      expect(spent.get('k999')).toBe(1 + (999 % 7))
    })

    it("drops a window's shards from the ledger with the window, and all with the part", () => {
      const { pool, window } = crowded()
      const ledger = new MemoryLedger()
      const shardsOf = (w: number) =>
        ledger
          .entries()
          .filter((e) => e.clientKey === 'central' && e.resource.startsWith('\u0000'))
          .filter((e) => e.reserved![0]!.window === w).length
      pool.reserveSpend('central', 'q/*', window, keys(200))
      ledger.write(pool.takeChanges((ms) => ms))
      expect(shardsOf(window)).toBeGreaterThan(40)
      pool.reserveSpend('central', 'q/*', window + 1, [['k1', 1]])
      pool.reserveSpend('central', 'q/*', window + 2, [['k1', 1]])
      ledger.write(pool.takeChanges((ms) => ms))
      expect(shardsOf(window)).toBeGreaterThan(40)
      // Three windows kept: the fourth drops the first.
      pool.reserveSpend('central', 'q/*', window + 3, [['k1', 1]])
      ledger.write(pool.takeChanges((ms) => ms))
      expect(shardsOf(window)).toBe(0)
      expect(shardsOf(window + 1)).toBe(1)
      // The part replaced: its shards leave with its share.
      pool.connect('central', centralClientId, undefined, 'central-2', 6200)
      ledger.write(pool.takeChanges((ms) => ms))
      expect(ledger.entries().filter((e) => e.resource.startsWith('\u0000'))).toEqual([])
    })

    it('is kept whole by a snapshot (a compaction), and a ledger of the earlier shape is written again in shards', () => {
      const { pool, window } = crowded()
      pool.reserveSpend('central', 'q/*', window, keys(300))
      pool.takeChanges((ms) => ms)
      const snapshot = pool.ledgerEntries((ms) => ms)
      expect(handedFrom(snapshot).handed?.inherit?.keys).toHaveLength(300)

      // The earlier shape: every count in the share's entry, no shards.
      const legacy = snapshot
        .filter((e) => !e.resource.startsWith('\u0000'))
        .map((e) => {
          if (e.clientKey !== 'central' || e.resource !== 'q/*') return e
          const { reservedIn, ...rest } = e
          expect(reservedIn).toBe('shards')
          return { ...rest, reserved: [{ window, keys: keys(300) }] }
        })
      expect(handedFrom(legacy).handed?.inherit?.keys).toHaveLength(300)
      // Restored, it writes its counts in shards before its entry says they are there.
      const again = new Pool(0, (id) => config.settingsFor(id), { track: true, learn: false })
      again.restore(legacy, (ms) => ms, 6500)
      const ledger = new MemoryLedger()
      ledger.write(again.takeChanges((ms) => ms))
      expect(
        ledger.entries().find((e) => e.clientKey === 'central' && e.resource === 'q/*')?.reservedIn,
      ).toBe('shards')
      expect(handedFrom(ledger.entries()).handed?.inherit?.keys).toHaveLength(300)
    })

    it('holds no more keys of a window than a release may say: past them the window is full, not vouched for, and its shards leave the ledger with the window', () => {
      const { pool, window } = crowded()
      const ledger = new MemoryLedger()
      const max = domainLimits.maxSpentKeys
      pool.reserveSpend('central', 'q/*', window, keys(max))
      ledger.write(pool.takeChanges((ms) => ms))
      const shards = () => ledger.entries().filter((e) => e.resource.startsWith('\u0000'))
      expect(shards().length).toBe(64)
      // Raising a key it holds keeps the window as it is; one key more fills it.
      pool.reserveSpend('central', 'q/*', window, [['k1', 99]])
      expect(pool.reserveSpend('central', 'q/*', window, [[`k${max}`, 1]])).toBe(true)
      const changes = pool.takeChanges((ms) => ms)
      // The mark alone: its shards stay until the window is dropped (a ledger committing a
      // write in parts could otherwise keep their removal without the mark).
      expect(changes.map((c) => ('put' in c ? c.put.resource : 'remove'))).toEqual(['q/*'])
      ledger.write(changes)
      expect(shards().length).toBe(64)
      const entry = ledger.entries().find((e) => e.clientKey === 'central' && e.resource === 'q/*')
      expect(entry?.reservedFull).toEqual([window])
      // Nothing more is kept of it.
      pool.reserveSpend('central', 'q/*', window, keys(10))
      expect(pool.takeChanges((ms) => ms)).toEqual([])
      // A restart from the ledger cannot say what the dead part spent (the mark overrides the
      // shards): its share stays spent.
      const { handed, restarted, restored } = handedFrom(ledger.entries())
      expect(handed).toBeUndefined()
      expect(restarted.pool.committed('q/*', 8000)).toBeGreaterThanOrEqual(restored - 1e-9)
      // Dropped with the window: three windows later, every shard of it leaves the ledger.
      for (const w of [window + 1, window + 2, window + 3])
        pool.reserveSpend('central', 'q/*', w, [['k1', 1]])
      ledger.write(pool.takeChanges((ms) => ms))
      expect(shards().filter((e) => e.reserved![0]!.window === window)).toEqual([])
    })

    it('is full by the coordinator’s word too (its own count of keys), and so is a later window', () => {
      const { pool, window, leasesTo, period } = crowded()
      pool.reserveSpend('central', 'q/*', window, [['b', 2]])
      expect(pool.reserveFull('central', 'q/*', window + 1)).toBe(true)
      expect(pool.reserveFull('nobody', 'q/*', window)).toBe(false)
      pool.connect('central', centralClientId, undefined, 'central-2', 6200)
      period(6300)
      period(7300)
      // The window in force is vouched for (b's 2), the full one after it is not in force yet.
      const handed = leasesTo('central', 'q/*').find((l) => l.inherit !== undefined)
      expect(handed?.inherit?.keys).toEqual([['b', 2]])
    })
  })
})

describe("a keyed quota's key entries that never hold anything (ledger-projection.ts, unrecorded)", () => {
  /**
   * The crowded family through a window's edge (1 h windows: at 3,600 s), the ledger written
   * after each period: the processes are sent a lease of 0 of key a (hot at the central part)
   * with each window's first family lease.
   */
  function throughAnEdge() {
    const w = world()
    const ledger = new MemoryLedger()
    const written: LedgerChange[] = []
    const period = (t: number, window?: number): void => {
      w.period(t, window)
      const changes = w.pool.takeChanges((ms) => ms)
      written.push(...changes)
      ledger.write(changes)
    }
    w.pool.connect('central', centralClientId, undefined, 'central-1', 0)
    for (const p of processes) w.pool.connect(p, p, undefined, `${p}-1`, 0)
    for (let t = 1000; t <= 3000; t += 1000) period(t)
    const window = w.leasesTo('central', 'q/*').at(-1)!.window!.index
    for (let t = 4000; t <= 9000; t += 1000) period(t, window)
    for (let t = 3_596_000; t <= 3_606_000; t += 1000)
      period(t, t < 3_600_000 ? window : window + 1)
    return { ...w, ledger, written, window }
  }
  const about = (c: LedgerChange) => ('put' in c ? c.put : c.remove)

  it('are not written, nor is their removal', () => {
    const { written, leasesTo, window } = throughAnEdge()
    // Each process was sent a's 0 of both windows...
    for (const p of processes)
      expect(leasesTo(p, 'q/a').map((l) => [l.capacity, l.window?.index])).toEqual([
        [0, window],
        [0, window + 1],
      ])
    // ...and the ledger heard of none of them, nor of their going; the central part's lease of
    // a and the processes' shares are written as ever.
    const ofKeyA = written.filter((c) => about(c).resource === 'q/a')
    expect(ofKeyA.length).toBeGreaterThan(0)
    expect(ofKeyA.filter((c) => about(c).clientKey !== 'central')).toEqual([])
    for (const p of processes)
      expect(
        written.some((c) => 'put' in c && c.put.clientKey === p && c.put.resource === 'q/*'),
      ).toBe(true)
  })

  it('are sent again after a restart from a ledger without them: no process takes its default share of the key', () => {
    const { ledger, window } = throughAnEdge()
    const restarted = world(
      new Pool(0, (id) => config.settingsFor(id), { track: true, learn: false }),
    )
    restarted.pool.restore(ledger.entries(), (ms) => ms, 3_606_500)
    restarted.pool.connect('central', centralClientId, undefined, 'central-2', 3_606_600)
    for (const p of processes) restarted.pool.connect(p, p, undefined, `${p}-2`, 3_606_600)
    for (let t = 3_607_000; t <= 3_610_000; t += 1000) {
      restarted.period(t, window + 1)
      expect(restarted.pool.committed('q/a', t)).toBeLessThanOrEqual(100 + 1e-9)
    }
    // Each process heard a's 0 of the window with its first family lease after the restart.
    for (const p of processes) {
      const first = restarted.sent.find(
        (b) => b.clientKey === p && b.leases.some((l) => l.resource === 'q/*'),
      )
      expect(first?.leases.find((l) => l.resource === 'q/a')).toMatchObject({
        capacity: 0,
        window: { index: window + 1 },
      })
    }
  })
})
