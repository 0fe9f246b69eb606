import { describe, expect, it } from 'vitest'
import { CompiledConfig, parseConfig } from '../../../server/config/index.js'
import { Pool, type LeaseBatch } from '../../../server/pool/index.js'
import type { LeaseGrant } from '../../../shared/index.js'

/**
 * What a falling rate share gave up (its ack's `held`) goes whole to the next share that rises
 * by at least as much, in that rise's lease (server/pool/hand-back.ts), capped at what the
 * fall could hold; a rise that takes less, or a riser with a handover pending, drops it.
 */
function family() {
  const config = new CompiledConfig(
    parseConfig({
      resources: [{ match: 'key/*', keyed: true, kind: 'rate', capacity: 12, burst: 12 }],
    }),
  )
  const pool = new Pool(0, (id) => config.settingsFor(id), { learn: false })
  const leases = new Map<string, LeaseGrant>()
  /** Batches sent and not yet acknowledged, by client. */
  const unacked = new Map<string, number[]>()
  let nowMs = 0
  const take = (batches: readonly LeaseBatch[], ack: (client: string) => boolean): void => {
    for (const b of batches) {
      for (const l of b.leases) if (l.resource === 'key/*') leases.set(b.clientKey, l)
      if (ack(b.clientKey)) take(pool.acknowledge(b.clientKey, b.seq, undefined, nowMs), ack)
      else unacked.set(b.clientKey, [...(unacked.get(b.clientKey) ?? []), b.seq])
    }
  }
  const all = (): boolean => true
  const join = (c: string, ack: (client: string) => boolean = all): void => {
    pool.connect(c, c, undefined, `${c}-instance`, nowMs)
    take(pool.reportDemand(c, [{ resource: 'key/*', wants: 100 }], nowMs).batches, ack)
  }
  const round = (ms: number, ack: (client: string) => boolean = all): void => {
    nowMs += ms
    take(pool.roundMany(['key/*'], nowMs), ack)
  }
  /** Acknowledges `client`'s batches held back, the last with `held`. */
  const ackHeld = (client: string, held: { level: number; keys: [string, number][] }): void => {
    const seqs = unacked.get(client) ?? []
    unacked.delete(client)
    for (const [i, seq] of seqs.entries())
      take(
        pool.acknowledge(
          client,
          seq,
          undefined,
          nowMs,
          i === seqs.length - 1 ? [{ resource: 'key/*', ...held }] : [],
        ),
        all,
      )
  }
  const share = (c: string): number => leases.get(c)?.capacity ?? 0
  return { pool, leases, join, round, ackHeld, share, unacked, now: () => nowMs }
}

describe('what a falling rate share gave up', () => {
  it('goes whole to the share that rises by as much, in that rise’s lease, capped at the fall', () => {
    const f = family()
    for (const c of ['a', 'b']) f.join(c)
    for (let i = 0; i < 5; i++) f.round(100)
    expect(f.share('a')).toBeCloseTo(1 / 2, 9)
    // C joins; A and B fall to a third and hold their acks back, then say what they gave up.
    const holdBack = (c: string): boolean => c !== 'a' && c !== 'b'
    f.join('c', holdBack)
    f.round(100, holdBack)
    expect(f.share('a')).toBeCloseTo(1 / 3, 9)
    expect(f.share('c')).toBe(0)
    // A names `x` with 1 token and claims more of `y` than half a burst of 12 could hold.
    f.ackHeld('a', {
      level: 1 / 6,
      keys: [
        ['x', 1],
        ['y', 50],
      ],
    })
    // Only A's sixth is free: C's rise must wait for B's, and so do the tokens.
    expect(f.share('c')).toBe(0)
    f.ackHeld('b', { level: 0.9, keys: [] })
    const grant = f.leases.get('c')!
    expect(grant.capacity).toBeCloseTo(1 / 3, 9)
    // Level: a sixth from each (B's 0.9 capped at its fall), every key's part of its burst.
    expect(grant.handed!.level).toBeCloseTo(1 / 3, 9)
    const keys = new Map(grant.handed!.keys)
    // x: A's 1 token and B's sixth of 12; y: A's half burst (its share before) and B's sixth.
    expect(keys.get('x')).toBeCloseTo(1 + 2, 9)
    expect(keys.get('y')).toBeCloseTo(6 + 2, 9)
  })

  it('is dropped when the rise takes less than every slice it came from', () => {
    const f = family()
    f.join('a')
    for (let i = 0; i < 5; i++) f.round(100)
    expect(f.share('a')).toBeCloseTo(1, 9)
    // Two join at once: the slice A gives goes to two risers, a part each.
    const holdBack = (c: string): boolean => c !== 'a'
    f.join('c', holdBack)
    f.join('d', holdBack)
    f.round(100, holdBack)
    expect(f.share('a')).toBeCloseTo(1 / 3, 9)
    f.ackHeld('a', { level: 2 / 3, keys: [] })
    for (let i = 0; i < 5; i++) f.round(100)
    expect(f.share('c')).toBeCloseTo(1 / 3, 9)
    expect(f.share('d')).toBeCloseTo(1 / 3, 9)
    expect(f.leases.get('c')!.handed).toBeUndefined()
    expect(f.leases.get('d')!.handed).toBeUndefined()
  })

  it('is ignored in an ack that does not acknowledge a fall (a repeated ack)', () => {
    const f = family()
    for (const c of ['a', 'b']) f.join(c)
    for (let i = 0; i < 5; i++) f.round(100)
    const holdBack = (c: string): boolean => c !== 'a' && c !== 'b'
    f.join('c', holdBack)
    f.round(100, holdBack)
    const seqs = [...(f.unacked.get('a') ?? [])]
    // A acknowledges its fall saying nothing, then again, claiming a sixth of every key.
    f.ackHeld('a', { level: 0, keys: [] })
    for (const seq of seqs)
      f.pool.acknowledge('a', seq, undefined, f.now(), [
        { resource: 'key/*', level: 1 / 6, keys: [] },
      ])
    f.ackHeld('b', { level: 1 / 6, keys: [] })
    const grant = f.leases.get('c')!
    expect(grant.capacity).toBeCloseTo(1 / 3, 9)
    // B's sixth only.
    expect(grant.handed!.level).toBeCloseTo(1 / 6, 9)
  })
})
