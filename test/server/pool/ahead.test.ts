import { describe, expect, it } from 'vitest'
import { MemoryLedger } from '../../../server/ledger/index.js'
import { QuotaWindows } from '../../../server/coordinator/quota-clock.js'
import { Pool, type LeaseBatch } from '../../../server/pool/index.js'
import { ManualClock } from '../../../shared/index.js'
import { quotaSettings } from '../../helpers/settings.js'

/**
 * A named quota's next window sent ahead (server/pool/ahead.ts): the leases sent again before a
 * window's end carry each client's block of the next one, counted against it from then, kept by
 * the ledger, and the client's lease once the next window is in force (#41: checks of budgets
 * nobody spent were refused from a few ms before each edge until the next window's round, 5–15
 * ms after it).
 */

const settings = quotaSettings(60_000)
const keys = ['a', 'b', 'c'] as const

/**
 * Three clients asking 5 units a second of a quota of 1,000 a minute, each acknowledging all, to
 * `untilMs`; on the coordinator's windows' clock when `clock` is given (moved along).
 */
function steady(untilMs: number, ledger?: MemoryLedger, clock?: ManualClock): Pool {
  const pool = new Pool(0, () => settings, {
    learn: false,
    track: ledger !== undefined,
    ...(clock === undefined ? {} : { quotaClock: new QuotaWindows(clock).at }),
  })
  for (const key of keys) pool.connect(key, key, undefined, `inst-${key}`, 0)
  const ackAll = (batches: readonly LeaseBatch[], t: number): void => {
    ledger?.write(pool.takeChanges((ms) => ms))
    for (const b of batches) pool.acknowledge(b.clientKey, b.seq, undefined, t)
  }
  let n = 0
  for (let t = 0; t <= untilMs; t += 1000) {
    clock?.advanceTo(t)
    n++
    for (const key of keys)
      ackAll(pool.reportDemand(key, [{ resource: 'q', wants: 5, window: 0 }], t, n).batches, t)
    ackAll(pool.round('q', t), t)
  }
  return pool
}

describe('a named quota’s next window sent ahead', () => {
  it('goes with the leases sent again before the end: each client’s block of the next window, opening no sooner than the window', () => {
    const pool = steady(59_000)
    const batches = pool.renewEdges(['q'], 59_900)
    expect(batches.map((b) => b.clientKey).sort()).toEqual([...keys])
    let sum = 0
    for (const b of batches) {
      const w = b.leases[0]!.window!
      expect(w.index).toBe(0)
      const next = w.next!
      expect(next.index).toBe(1)
      // Five a second over the horizon (two periods of 1 s) and what comes by chance: a block.
      expect(next.capacity).toBeGreaterThanOrEqual(10)
      expect(next.capacity).toBeLessThan(100)
      // 100 ms to the window's start, stretched by the windows' slew (1.1%), and 1 ms.
      expect(next.startsInMs).toBe(103)
      // To the next window's end, 100 ms + 60 s from now, less the grace.
      expect(next.endsInMs).toBe(60_100 - settings.graceMs)
      // Measured from the client's newest report (handled at 59 s) as the window's own end.
      expect(next.edge?.[0]).toBe(w.edge?.[0])
      sum += next.capacity
    }
    expect(sum).toBeLessThanOrEqual(settings.capacity)
    // Counted from now: each client commits at least its block of the next window.
    for (const b of batches)
      expect(pool.committedBy(b.clientKey, 'q', 59_901)).toBeGreaterThanOrEqual(
        b.leases[0]!.window!.next!.capacity,
      )
    // Sent once a window: the leases sent again later carry the same blocks.
    const again = pool.renewEdges(['q'], 59_950)
    for (const b of again) {
      const before = batches.find((x) => x.clientKey === b.clientKey)!
      expect(b.leases[0]!.window!.next).toMatchObject({
        index: 1,
        capacity: before.leases[0]!.window!.next!.capacity,
      })
    }
  })

  it('is each client’s lease once the next window is in force, and its rounds go on from there', () => {
    const pool = steady(59_000)
    const aheadOf = new Map<string, number>()
    for (const b of pool.renewEdges(['q'], 59_900)) {
      aheadOf.set(b.clientKey, b.leases[0]!.window!.next!.capacity)
      pool.acknowledge(b.clientKey, b.seq, undefined, 59_900)
    }
    // The edge's round; once every lease of the window before is over (its grace past the
    // end), each client holds its block sent ahead, as its newest lease, or what the round
    // raised it to (never less: a block sent is counted until the window's end).
    const edge = pool.round('q', 60_000)
    const afterMs = 60_000 + settings.graceMs + 1
    for (const key of keys) {
      const sent = edge.find((b) => b.clientKey === key)!.leases[0]!.capacity
      expect(sent).toBeGreaterThanOrEqual(aheadOf.get(key)!)
      expect(pool.committedBy(key, 'q', afterMs)).toBe(sent)
    }
    // The round sends it again, of the new window (a client whose copy came late has it at
    // once, rather than when its own clock opens the window), or what the round gives instead.
    expect(edge.map((b) => b.clientKey).sort()).toEqual([...keys])
    for (const b of edge)
      for (const l of b.leases) {
        expect(l.window).toMatchObject({ index: 1 })
        expect(l.window?.next).toBeUndefined()
      }
    // Its renewal, half the window on (a third to a half of the lease's life), is of what the
    // edge's round sent it.
    const renewed = pool.reportDemand('a', [{ resource: 'q', wants: 5, window: 1 }], 91_000, 99)
    const lease = renewed.batches.flatMap((b) => b.leases).find((l) => l.resource === 'q')!
    expect(lease.window?.index).toBe(1)
    const sentAtEdge = edge.find((b) => b.clientKey === 'a')!.leases[0]!.capacity
    expect(sentAtEdge).toBeGreaterThanOrEqual(aheadOf.get('a')!)
    expect(lease.capacity).toBe(sentAtEdge)
    expect(lease.window?.next).toBeUndefined()
  })

  it('is kept by the ledger: a coordinator restarted before the edge counts every block sent ahead in the next window', () => {
    const ledger = new MemoryLedger()
    const pool = steady(59_000, ledger)
    let ahead = 0
    for (const b of pool.renewEdges(['q'], 59_900)) ahead += b.leases[0]!.window!.next!.capacity
    ledger.write(pool.takeChanges((ms) => ms))
    expect(ahead).toBeGreaterThan(0)
    // Restarted at 59.95 s from the ledger; once the leases of the window before are over
    // (their grace past its end), a new process asks for all of it.
    const restarted = new Pool(59_950, () => settings, { learn: false })
    restarted.restore(ledger.entries(), (ms) => ms, 59_950)
    const afterMs = 60_000 + settings.graceMs + 1
    expect(restarted.committed('q', afterMs)).toBeGreaterThanOrEqual(ahead)
    restarted.connect('d', 'd', undefined, 'inst-d', afterMs)
    restarted.reportDemand('d', [{ resource: 'q', wants: 100_000 }], afterMs)
    let granted = 0
    for (const b of [...restarted.round('q', afterMs), ...restarted.grantWaiting('q', afterMs)])
      for (const l of b.leases) if (b.clientKey === 'd') granted = Math.max(granted, l.capacity)
    expect(granted).toBeGreaterThan(0)
    expect(granted).toBeLessThanOrEqual(settings.capacity - ahead)
    expect(restarted.committed('q', afterMs)).toBeLessThanOrEqual(settings.capacity)
  })

  it('leaves the window in force as it is on the coordinator’s windows’ clock: leases sent after are of it', () => {
    const clock = new ManualClock(0, 0)
    const pool = steady(59_000, undefined, clock)
    clock.advanceTo(59_900)
    const renewed = pool.renewEdges(['q'], 59_900)
    expect(renewed[0]!.leases[0]!.window).toMatchObject({ index: 0, next: { index: 1 } })
    // a asks much more 50 ms before the end: its lease is of window 0, ending at 60 s.
    clock.advanceTo(59_950)
    const more = pool.reportDemand('a', [{ resource: 'q', wants: 500, window: 0 }], 59_950, 1_000)
    const leases = [...more.batches, ...pool.round('q', 59_950)].flatMap((b) => b.leases)
    expect(leases.length).toBeGreaterThan(0)
    for (const l of leases) expect(l.window?.index).toBe(0)
    expect(pool.windowEndMs('q', 59_950)).toBe(60_000)
  })

  it('goes to a client whose lease waited for its ack at the renewal once it acknowledges, before the end', () => {
    const pool = steady(59_000)
    // a asks far more at 59.5 s: the round grants it more, the lease not acknowledged yet when
    // the leases go again 100 ms before the end.
    pool.reportDemand('a', [{ resource: 'q', wants: 50, window: 0 }], 59_500, 1_000)
    const raised = pool.round('q', 59_500).find((b) => b.clientKey === 'a')!
    const renewed = pool.renewEdges(['q'], 59_900)
    expect(renewed.map((b) => b.clientKey).sort()).toEqual(['b', 'c'])
    // Its ack comes 50 ms before the end: its lease goes again with its block of the next window.
    const late = pool.acknowledge('a', raised.seq, undefined, 59_950)
    expect(late.map((b) => b.clientKey)).toEqual(['a'])
    const lease = late.filter((b) => b.clientKey === 'a').flatMap((b) => b.leases)[0]!
    expect(lease.window).toMatchObject({ index: 0, next: { index: 1 } })
    expect(lease.window!.next!.capacity).toBeGreaterThan(0)
    let ahead = lease.window!.next!.capacity
    for (const b of renewed) ahead += b.leases[0]!.window!.next!.capacity
    expect(ahead).toBeLessThanOrEqual(settings.capacity)
    // Once: an ack after that sends nothing again for it.
    const seq = late.find((b) => b.clientKey === 'a')!.seq
    expect(pool.acknowledge('a', seq, undefined, 59_960)).toEqual([])
    // Nor after the end.
    expect(pool.renewEdges(['q'], 60_000)).toEqual([])
  })

  it('is not sent once the window has ended', () => {
    const pool = steady(59_000)
    expect(pool.renewEdges(['q'], 60_000)).toEqual([])
  })
})

describe('a named quota’s block sent ahead, released', () => {
  it('comes back with a release that says what was used of the window ending; stays counted with one that says the next', () => {
    for (const saidWindow of [0, 1]) {
      const pool = steady(59_000)
      let ahead = 0
      for (const b of pool.renewEdges(['q'], 59_900)) {
        if (b.clientKey === 'a') ahead = b.leases[0]!.window!.next!.capacity
        pool.acknowledge(b.clientKey, b.seq, undefined, 59_900)
      }
      expect(ahead).toBeGreaterThan(0)
      // a closes (a deploy's SIGTERM) saying what it used: of window 0 (the next had not
      // opened there), or 3 of window 1 (it had).
      pool.release('a', ['q'], 59_990, [
        { resource: 'q', window: saidWindow, used: saidWindow === 0 ? 100 : 3 },
      ])
      pool.disconnect('a', 59_990)
      const afterMs = 60_000 + settings.graceMs + 1
      pool.round('q', afterMs)
      const held =
        pool.committed('q', afterMs) -
        keys.slice(1).reduce((sum, key) => sum + pool.committedBy(key, 'q', afterMs), 0)
      if (saidWindow === 0) expect(held, 'given back').toBe(0)
      else expect(held, 'counted: it may have spent it').toBe(ahead)
    }
  })
})
