import { describe, expect, it } from 'vitest'
import { CompiledConfig, parseConfig } from '../../../server/config/index.js'
import { Pool, type LeaseBatch } from '../../../server/pool/index.js'
import type { LeaseGrant } from '../../../shared/index.js'

/**
 * A named rate's fall hands on what it held (clients.ts `noteGiven`, lease-out.ts): the tokens
 * a holder's ack says its bucket gave up go to the rises granted while that ack is handled,
 * each up to the burst it gains, never more than the fall's share of the burst; what no such
 * rise takes is dropped (test/server/pool/burst-slack.test.ts, 'move', says why).
 */
function world() {
  const config = new CompiledConfig(
    parseConfig({ resources: [{ match: 'api', kind: 'rate', capacity: 100, burst: 100 }] }),
  )
  // A coordinator whose ledger says nothing was ever leased (pool-start.ts): all of it is free.
  const pool = new Pool(0, (id) => config.settingsFor(id), {
    learn: false,
    quietSinceMs: -Infinity,
  })
  let nowMs = 0
  const newest = new Map<string, LeaseGrant>()
  /** Batches not acknowledged yet, by client. */
  const unacked = new Map<string, LeaseBatch[]>()
  const take = (batches: readonly LeaseBatch[]): void => {
    for (const b of batches) {
      for (const l of b.leases) newest.set(b.clientKey, l)
      unacked.set(b.clientKey, [...(unacked.get(b.clientKey) ?? []), b])
    }
  }
  /** Client `c` acknowledges its batches, saying it gave up `gave` tokens (if any). */
  const ack = (c: string, gave?: number): void => {
    for (const b of unacked.get(c) ?? [])
      take(
        pool.acknowledge(
          c,
          b.seq,
          undefined,
          nowMs,
          gave === undefined ? undefined : [['api', gave]],
        ),
      )
    unacked.delete(c)
  }
  const join = (c: string, wants: number): void => {
    pool.connect(c, c, undefined, `${c}-instance`, nowMs)
    take(pool.reportDemand(c, [{ resource: 'api', wants }], nowMs).batches)
  }
  const round = (ms: number): void => {
    nowMs += ms
    take(pool.round('api', nowMs))
  }
  return { join, round, ack, lease: (c: string) => newest.get(c) }
}

describe("a named rate's fall", () => {
  it('hands what the faller gave up to the rise its ack lets through, capped at the fall', () => {
    const w = world()
    w.join('a', 200)
    w.round(100)
    w.ack('a')
    // Alone, a is leased the whole, and its bucket starts full (nobody ever held any).
    expect(w.lease('a')).toMatchObject({ capacity: 100, full: true })
    // b asks as much: a falls to half, and b's rise waits for a's ack.
    w.join('b', 200)
    w.round(100)
    w.ack('b')
    expect(w.lease('a')!.capacity).toBe(50)
    expect(w.lease('b')!.capacity).toBe(0)
    // a's bucket gave up what its half held above its new burst; it says more than it could
    // (a client's word is held to the fall's share of the burst: 50).
    w.ack('a', 80)
    expect(w.lease('b')).toMatchObject({ capacity: 50, fill: 50 })
  })

  it('hands nothing that an ack did not say', () => {
    const w = world()
    w.join('a', 200)
    w.round(100)
    w.ack('a')
    w.join('b', 200)
    w.round(100)
    w.ack('b')
    // a's ack says nothing of what it gave up: b's rise holds nothing.
    w.ack('a')
    expect(w.lease('b')!.capacity).toBe(50)
    expect(w.lease('b')!.fill).toBeUndefined()
  })
})
