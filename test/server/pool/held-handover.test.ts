import { describe, expect, it } from 'vitest'
import { CompiledConfig, parseConfig } from '../../../server/config/index.js'
import { Pool, type LeaseBatch } from '../../../server/pool/index.js'
import type { LeaseGrant } from '../../../shared/index.js'

/**
 * A rate family's share released with what it held (server/pool/held-handover.ts): set aside
 * for a refresh period, handed whole to a process that holds nothing yet, with what it held,
 * capped at what that share could hold; dropped to the others after the patience.
 */
function family() {
  const config = new CompiledConfig(
    parseConfig({
      resources: [
        {
          match: 'key/*',
          keyed: true,
          kind: 'rate',
          capacity: 20,
          burst: 20,
          keys: { big: { capacity: 60, burst: 60 } },
        },
      ],
    }),
  )
  const pool = new Pool(0, (id) => config.settingsFor(id), { learn: false })
  const leases = new Map<string, LeaseGrant>()
  /** Every client's newest lease of a hot key: `${client} ${key id}`. */
  const keyLeases = new Map<string, LeaseGrant>()
  let nowMs = 0
  const take = (batches: readonly LeaseBatch[], ack = true): void => {
    for (const b of batches) {
      for (const l of b.leases)
        if (l.resource === 'key/*') leases.set(b.clientKey, l)
        else keyLeases.set(`${b.clientKey} ${l.resource}`, l)
      if (ack) pool.acknowledge(b.clientKey, b.seq, undefined, nowMs)
    }
  }
  const join = (c: string): void => {
    pool.connect(c, c, undefined, `${c}-instance`, nowMs)
    take(pool.reportDemand(c, [{ resource: 'key/*', wants: 100 }], nowMs).batches)
  }
  const round = (ms: number, ack = true): void => {
    nowMs += ms
    take(pool.roundMany(['key/*', 'key/hot'], nowMs), ack)
  }
  const share = (c: string): number => leases.get(c)?.capacity ?? 0
  const settle = (): void => {
    for (let i = 0; i < 5; i++) round(100)
  }
  const keyLease = (c: string, id: string): LeaseGrant | undefined => keyLeases.get(`${c} ${id}`)
  const keyShare = (c: string, id: string): number => keyLease(c, id)?.capacity ?? 0
  /** Client `c` asks for the family and for key `id` (30/s: more than the key's 20/s). */
  const ask = (c: string, id: string): void =>
    take(
      pool.reportDemand(
        c,
        [
          { resource: 'key/*', wants: 100 },
          { resource: id, wants: 30 },
        ],
        nowMs,
      ).batches,
    )
  return {
    pool,
    leases,
    join,
    round,
    share,
    settle,
    take,
    keyLease,
    keyShare,
    ask,
    now: () => nowMs,
  }
}

describe('a rate family share released with what it held', () => {
  it('waits for the replacement, which gets it whole with what it held, capped at the share', () => {
    const f = family()
    for (const c of ['a', 'b', 'c']) f.join(c)
    f.settle()
    for (const c of ['a', 'b', 'c']) expect(f.share(c)).toBeCloseTo(1 / 3, 9)
    // A closes cleanly: it held half of its share of every key it did not name, 2 tokens of
    // `spent`, and claims more than its share could hold of `greedy` and of `big`.
    f.take(
      f.pool.release('a', ['key/*'], f.now(), undefined, [
        {
          resource: 'key/*',
          level: 0.9,
          keys: [
            ['spent', 2],
            ['greedy', 500],
            ['big', 500],
          ],
        },
      ]),
    )
    // The others keep their shares: nothing moves while the vacancy waits.
    f.round(300)
    expect(f.share('b')).toBeCloseTo(1 / 3, 9)
    expect(f.share('c')).toBeCloseTo(1 / 3, 9)
    expect(f.pool.committed('key/*', f.now())).toBeCloseTo(1, 9)
    // Its replacement joins and is handed the share whole, with what it held.
    f.join('d')
    f.round(100)
    const grant = f.leases.get('d')!
    expect(grant.capacity).toBeCloseTo(1 / 3, 9)
    expect(grant.handed).toBeDefined()
    expect(grant.handed!.level).toBeCloseTo(1 / 3, 9)
    const handed = new Map(grant.handed!.keys)
    // What each key held, and what the share earned in the 400 ms since the release (a third
    // of 20/s), as the leaver's buckets would have, idle; never past what the share holds.
    expect(handed.get('spent')).toBeCloseTo(2 + (20 / 3) * 0.4, 9)
    expect(handed.get('greedy')).toBeCloseTo(20 / 3, 9)
    expect(handed.get('big')).toBeCloseTo(20, 9)
    f.settle()
    // Acknowledged: the vacancy left, and every share is as before.
    for (const c of ['b', 'c', 'd']) expect(f.share(c)).toBeCloseTo(1 / 3, 9)
    expect(f.pool.committed('key/*', f.now())).toBeCloseTo(1, 9)
    // Its renewals carry nothing more: the handover is settled.
    const settled = f.leases.get('d')
    for (let i = 0; i < 20 && f.leases.get('d') === settled; i++) {
      f.take(f.pool.reportDemand('d', [{ resource: 'key/*', wants: 100 }], f.now()).batches)
      f.round(1000)
    }
    expect(f.leases.get('d')).not.toBe(settled)
    expect(f.leases.get('d')!.handed).toBeUndefined()
  })

  it('sends what was handed with every lease of the heir until it acknowledges one', () => {
    const f = family()
    for (const c of ['a', 'b']) f.join(c)
    f.settle()
    f.take(
      f.pool.release('a', ['key/*'], f.now(), undefined, [
        { resource: 'key/*', level: 0.25, keys: [['x', 1]] },
      ]),
    )
    f.join('d')
    const lost = f.pool.roundMany(['key/*'], f.now() + 100)
    const id = lost.flatMap((b) => b.leases).find((l) => l.handed !== undefined)!.handed!.id
    // The lease that carried it never left: the next one says the same handover.
    f.pool.unsent(lost)
    f.take(f.pool.reportDemand('d', [{ resource: 'key/*', wants: 100 }], f.now() + 200).batches)
    expect(f.leases.get('d')?.handed?.id).toBe(id)
    f.settle()
    const settled = f.leases.get('d')
    for (let i = 0; i < 20 && f.leases.get('d') === settled; i++) {
      f.take(f.pool.reportDemand('d', [{ resource: 'key/*', wants: 100 }], f.now()).batches)
      f.round(1000)
    }
    expect(f.leases.get('d')!.handed).toBeUndefined()
    expect(f.pool.committed('key/*', f.now())).toBeCloseTo(1, 9)
  })

  it('goes to the others after a refresh period when nobody comes to take it (a scale-down)', () => {
    const f = family()
    for (const c of ['a', 'b', 'c']) f.join(c)
    f.settle()
    f.take(
      f.pool.release('a', ['key/*'], f.now(), undefined, [
        { resource: 'key/*', level: 1 / 3, keys: [] },
      ]),
    )
    f.round(500)
    expect(f.share('b')).toBeCloseTo(1 / 3, 9)
    for (let i = 0; i < 10; i++) f.round(200)
    expect(f.share('b')).toBeCloseTo(1 / 2, 9)
    expect(f.share('c')).toBeCloseTo(1 / 2, 9)
    expect(f.leases.get('b')!.handed).toBeUndefined()
  })

  it('a release that says nothing held frees the share at once, as before', () => {
    const f = family()
    for (const c of ['a', 'b']) f.join(c)
    f.settle()
    f.take(f.pool.release('a', ['key/*'], f.now()))
    f.round(100)
    f.round(100)
    expect(f.share('b')).toBeCloseTo(1, 9)
  })

  describe('with a hot key (a key leased on its own)', () => {
    /** a, b and c hold the family and share key/hot; a closes cleanly, naming the key. */
    const closed = () => {
      const f = family()
      for (const c of ['a', 'b', 'c']) f.join(c)
      f.settle()
      for (let i = 0; i < 8; i++) {
        for (const c of ['a', 'b', 'c']) f.ask(c, 'key/hot')
        f.round(200)
      }
      for (const c of ['a', 'b', 'c']) expect(f.keyShare(c, 'key/hot')).toBeCloseTo(20 / 3, 6)
      f.take(
        f.pool.release('a', ['key/*', 'key/hot'], f.now(), undefined, [
          { resource: 'key/*', level: 0.5, keys: [['hot', 0]] },
        ]),
      )
      return f
    }

    it('hands the leaver’s share of the key to its replacement at once; the others keep theirs', () => {
      const f = closed()
      // While the vacancy waits, nobody rises to the key's freed share.
      for (let i = 0; i < 3; i++) {
        for (const c of ['b', 'c']) f.ask(c, 'key/hot')
        f.round(100)
        for (const c of ['b', 'c']) expect(f.keyShare(c, 'key/hot')).toBeCloseTo(20 / 3, 6)
        expect(f.pool.committed('key/hot', f.now())).toBeLessThanOrEqual(20 + 1e-9)
      }
      // The replacement joins: with the family's share comes its share of the key.
      f.join('d')
      f.round(100)
      expect(f.keyShare('d', 'key/hot')).toBeCloseTo(20 / 3, 6)
      // Its bucket starts with what that share earned since the release, 400 ms at 20/3 per s.
      expect(f.keyLease('d', 'key/hot')?.fill).toBeCloseTo((20 / 3) * 0.4, 6)
      // The rise is the leaver's share alone: its tokens are the fresh part's, not a gift going.
      expect(f.keyLease('d', 'key/hot')?.fillWhole).toBe(true)
      for (const c of ['b', 'c']) expect(f.keyShare(c, 'key/hot')).toBeCloseTo(20 / 3, 6)
      expect(f.pool.committed('key/hot', f.now())).toBeLessThanOrEqual(20 + 1e-9)
      // And it keeps it as it asks: nothing moves.
      for (let i = 0; i < 8; i++) {
        for (const c of ['b', 'c', 'd']) f.ask(c, 'key/hot')
        f.round(200)
        expect(f.pool.committed('key/hot', f.now())).toBeLessThanOrEqual(20 + 1e-9)
      }
      for (const c of ['b', 'c', 'd']) expect(f.keyShare(c, 'key/hot')).toBeCloseTo(20 / 3, 6)
    })

    it('gives the key’s share to the others when nobody comes within a refresh period', () => {
      const f = closed()
      for (let i = 0; i < 10; i++) {
        for (const c of ['b', 'c']) f.ask(c, 'key/hot')
        f.round(200)
        expect(f.pool.committed('key/hot', f.now())).toBeLessThanOrEqual(20 + 1e-9)
      }
      for (const c of ['b', 'c']) expect(f.keyShare(c, 'key/hot')).toBeCloseTo(10, 6)
    })

    it('frees the key at once when the family’s release says nothing held, as before', () => {
      const f = family()
      for (const c of ['a', 'b']) f.join(c)
      f.settle()
      for (let i = 0; i < 8; i++) {
        for (const c of ['a', 'b']) f.ask(c, 'key/hot')
        f.round(200)
      }
      f.take(f.pool.release('a', ['key/*', 'key/hot'], f.now()))
      f.ask('b', 'key/hot')
      f.round(100)
      f.round(100)
      expect(f.keyShare('b', 'key/hot')).toBeCloseTo(20, 6)
    })
  })
})
