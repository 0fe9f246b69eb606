import { describe, expect, it } from 'vitest'
import { CompiledConfig, parseConfig } from '../../../server/config/index.js'
import { Pool, type LeaseBatch } from '../../../server/pool/index.js'

/**
 * A key of a keyed family asked for by more processes than its burst has tokens (20/s, burst
 * 20, 100 processes): a share of 0.2/s is a bucket that never holds a whole token and admits
 * nothing. The key's capacity goes whole, a token each, to as many as it can serve, and stays
 * with them while they keep asking.
 */
function manyHolders(n: number) {
  const config = new CompiledConfig(
    parseConfig({
      resources: [{ match: 'key/*', keyed: true, kind: 'rate', capacity: 20, burst: 20 }],
    }),
  )
  const pool = new Pool(0, (id) => config.settingsFor(id), { learn: false })
  const leases = new Map<string, number>()
  const take = (batches: readonly LeaseBatch[], nowMs: number): void => {
    for (const b of batches) {
      for (const l of b.leases) if (l.resource === 'key/hot') leases.set(b.clientKey, l.capacity)
      // What an ack frees goes out at once (an increase waiting for it), as the coordinator
      // sends it.
      take(pool.acknowledge(b.clientKey, b.seq, undefined, nowMs), nowMs)
    }
  }
  const clients = Array.from({ length: n }, (_, i) => `p${String(i).padStart(3, '0')}`)
  for (const c of clients) {
    pool.connect(c, c, undefined, `${c}-instance`, 0)
    take(pool.reportDemand(c, [{ resource: 'key/*', wants: 100 }], 0).batches, 0)
  }
  let nowMs = 0
  const rounds = (count: number, wants: (c: string) => number): void => {
    for (let r = 0; r < count; r++) {
      nowMs += 1000
      for (const c of clients)
        take(
          pool.reportDemand(
            c,
            [
              { resource: 'key/*', wants: 100 },
              { resource: 'key/hot', wants: wants(c) },
            ],
            nowMs,
          ).batches,
          nowMs,
        )
      take(pool.roundMany(pool.familyIds('key/*'), nowMs), nowMs)
    }
  }
  const holders = (): string[] => [...leases].filter(([, capacity]) => capacity > 0).map(([c]) => c)
  return { pool, leases, rounds, holders, now: () => nowMs }
}

describe('a hot key with more holders than tokens of burst', () => {
  it('goes whole to twenty of a hundred processes (1/s and a token each), not 0.2/s to all', () => {
    const { pool, leases, rounds, holders, now } = manyHolders(100)
    rounds(8, () => 5)
    const held = holders()
    expect(held).toHaveLength(20)
    for (const c of held) expect(leases.get(c)).toBeCloseTo(1, 9)
    expect(pool.committed('key/hot', now())).toBeLessThanOrEqual(20 + 1e-9)
  })

  it('stays with the processes that hold it while they ask, whoever asks more', () => {
    const { rounds, holders } = manyHolders(100)
    // The last twenty ask for more than a token a second, the others for a third of one: the
    // tokens go to those that would use them, the last twenty.
    rounds(8, (c) => (c >= 'p080' ? 5 : 0.3))
    const before = holders().sort()
    expect(before).toEqual(Array.from({ length: 20 }, (_, i) => `p0${80 + i}`))
    // Then all hundred ask, the others for more: the tokens stay where they are (moving one
    // costs a decrease, an ack and a bucket that starts empty).
    rounds(8, (c) => (before.includes(c) ? 5 : 9))
    expect(holders().sort()).toEqual(before)
    // A holder that stops asking gives its token up to one that asks.
    const quitter = before[0]!
    rounds(8, (c) => (c === quitter ? 0 : 5))
    expect(holders()).not.toContain(quitter)
    expect(holders()).toHaveLength(20)
  })

  it('leaves a key with few holders its exact max-min split', () => {
    const { leases, rounds } = manyHolders(3)
    rounds(8, () => 50)
    expect([...leases.values()].reduce((a, b) => a + b, 0)).toBeCloseTo(20, 9)
    for (const capacity of leases.values()) expect(capacity).toBeCloseTo(20 / 3, 9)
  })
})
