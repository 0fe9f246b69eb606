import { describe, expect, it } from 'vitest'
import { CompiledConfig, parseConfig } from '../../../server/config/index.js'
import { FallGifts } from '../../../server/pool/fall-gifts.js'
import { Pool, type LeaseBatch } from '../../../server/pool/index.js'
import type { LeaseGrant } from '../../../shared/index.js'

// What falls of a rate family's default share gave up, kept for a joiner's first share
// (server/pool/fall-gifts.ts). Its safety is BurstSlack's property ('fallGive', 'firstTake');
// here, the arithmetic: going as a fall's excess goes, capped at the share, merged, shared.

const refillMs = 1000
const burstOf = (key: string): number => (key === 'big' ? 100 : 10)

describe('FallGifts', () => {
  it('goes linearly to nothing over the refill time, and never gives past the share taken', () => {
    const gifts = new FallGifts(refillMs)
    gifts.add(0.5, [], 0)
    expect(gifts.take(1, burstOf, 10, 250)).toEqual({ level: 0.375, keys: [] })
    // Taken whole: nothing is left.
    expect(gifts.take(1, burstOf, 10, 250)).toBeUndefined()
    gifts.add(0.5, [], 0)
    expect(gifts.take(0.2, burstOf, 10, 0)).toEqual({ level: 0.2, keys: [] })
    gifts.add(0.5, [], 0)
    expect(gifts.take(1, burstOf, 10, 1000)).toBeUndefined()
  })

  it('merges the gifts of several falls, a key named in one counting the level of the others', () => {
    const gifts = new FallGifts(refillMs)
    // Two holders fell by a sixth each; one had spent most of key a (named with 1 token).
    gifts.add(1 / 6, [['a', 1]], 0)
    gifts.add(1 / 6, [], 0)
    const taken = gifts.take(1 / 3, burstOf, 10, 0)!
    expect(taken.level).toBeCloseTo(1 / 3, 9)
    // a: 1 from the first, a sixth of its burst of 10 from the second.
    expect(taken.keys).toHaveLength(1)
    expect(taken.keys[0]![0]).toBe('a')
    expect(taken.keys[0]![1]).toBeCloseTo(1 + 10 / 6, 9)
    // A key given at least the level is not named: the level is what it gets.
    gifts.add(0.25, [['b', 5]], 0)
    expect(gifts.take(0.25, burstOf, 10, 0)).toEqual({ level: 0.25, keys: [] })
  })

  it('leaves what one joiner did not take to the next, going on the oldest gift’s line', () => {
    const gifts = new FallGifts(refillMs)
    // One fell by two thirds as two joined in one round: the first joiner's third comes a
    // quarter of a refill time later, when half of the burst is left of it.
    gifts.add(2 / 3, [['a', 2]], 0)
    const first = gifts.take(1 / 3, burstOf, 10, 250)!
    expect(first.level).toBeCloseTo(1 / 3, 9)
    expect(first.keys).toEqual([['a', 1.5]])
    // At half a refill time, what is left has gone on as the gift would have: a third of the
    // burst was left of it there, less the third taken, a sixth; less still on the line from
    // the gift's own time (not from the take: that would leave a sixth, gone a third less).
    const second = gifts.take(1 / 3, burstOf, 10, 500)!
    expect(second.level).toBeCloseTo(((0.5 - 1 / 3) / 0.75) * 0.5, 9)
    // a: all that was left of it went to the first joiner.
    expect(second.keys).toEqual([['a', 0]])
    expect(gifts.take(1, burstOf, 10, 500)).toBeUndefined()
  })

  it('past the keys it may name, gives no level and names the keys holding most', () => {
    const gifts = new FallGifts(refillMs)
    gifts.add(
      0.5,
      [
        ['a', 1],
        ['b', 3],
        ['c', 0],
        ['big', 20],
      ],
      0,
    )
    expect(gifts.take(0.5, burstOf, 2, 0)).toEqual({
      level: 0,
      keys: [
        ['big', 20],
        ['b', 3],
      ],
    })
  })

  it('gives nothing once cleared (what the bound cannot see may hold it)', () => {
    const gifts = new FallGifts(refillMs)
    gifts.add(0.5, [], 0)
    gifts.clear()
    expect(gifts.take(1, burstOf, 10, 0)).toBeUndefined()
  })
})

/** A rate family of `burst` per key in a real Pool; acks say what each fall held, as clients do. */
function family(burst: number) {
  const config = new CompiledConfig(
    parseConfig({
      resources: [{ match: 'key/*', keyed: true, kind: 'rate', capacity: burst, burst }],
    }),
  )
  const pool = new Pool(0, (id) => config.settingsFor(id), { learn: false })
  const leases = new Map<string, LeaseGrant[]>()
  // Nobody held the family for a refill time (1 s) before: a first share may start full.
  let nowMs = 2000
  // Batches in the order they were made (an ack's grants after the batches before it).
  const take = (first: readonly LeaseBatch[]): void => {
    const queue = [...first]
    for (let b = queue.shift(); b !== undefined; b = queue.shift()) {
      const held = []
      for (const l of b.leases) {
        if (l.resource !== 'key/*') continue
        const mine = leases.get(b.clientKey) ?? []
        const before = mine.at(-1)?.capacity ?? 0
        mine.push(l)
        leases.set(b.clientKey, mine)
        // Its keys never seen: what fell of a full share is given up, as the client says.
        if (l.handOn === true)
          held.push({ resource: l.resource, level: before - l.capacity, keys: [] })
      }
      queue.push(
        ...pool.acknowledge(
          b.clientKey,
          b.seq,
          undefined,
          nowMs,
          undefined,
          held.length > 0 ? held : undefined,
        ),
      )
    }
  }
  const join = (c: string): void => {
    pool.connect(c, c, undefined, `${c}-instance`, nowMs)
    take(pool.reportDemand(c, [{ resource: 'key/*', wants: 100 }], nowMs).batches)
    for (let i = 0; i < 3; i++) {
      nowMs += 100
      take(pool.roundMany(['key/*'], nowMs))
    }
  }
  const first = (c: string): LeaseGrant | undefined => leases.get(c)?.find((l) => l.capacity > 0)
  return { join, first, leases }
}

describe('falls for a joiner in a pool', () => {
  it('give the joiner what fell: the first share starts full, the next from the first one’s fall', () => {
    const f = family(20)
    f.join('a')
    expect(f.first('a')?.full).toBe(true)
    f.join('b')
    expect(f.leases.get('a')?.some((l) => l.handOn === true)).toBe(true)
    expect(f.first('b')?.capacity).toBeCloseTo(0.5, 9)
    expect(f.first('b')?.handed?.level).toBeCloseTo(0.5, 2)
    f.join('c')
    expect(f.first('c')?.handed?.level).toBeCloseTo(1 / 3, 2)
  })
})
