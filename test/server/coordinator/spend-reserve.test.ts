import { describe, expect, it } from 'vitest'
import { KeyedFamily } from '../../../client/keyed/index.js'
import { resolveKeyedOptions } from '../../../client/options.js'
import { SpendReserve, aheadShare } from '../../../server/coordinator/spend-reserve.js'
import { ManualClock, domainLimits } from '../../../shared/index.js'

/**
 * The coordinator's own part answers a keyed quota's ask admitted only once the ledger holds
 * its unit reserved (server/coordinator/spend-reserve.ts): a family of the client on a manual
 * clock, a ledger whose writes complete when the test says.
 */
function world() {
  const clock = new ManualClock()
  const family = new KeyedFamily('k', resolveKeyedOptions('k', {}), clock, clock, {
    requestEarlyReport: () => undefined,
    drained: () => undefined,
  })
  const window = { index: 3, lengthMs: 60_000, endsInMs: 60_000, quota: 100 }
  family.applyFamilyLease({
    resource: 'k/*',
    kind: 'quota',
    capacity: 1,
    burst: 1,
    ttlMs: 60_000,
    refreshMs: 1000,
    safeCapacity: 0,
    safeHoldMs: 0,
    window,
    family: { kind: 'quota', capacity: 100, burst: 100 },
  })
  const reserved: [string, number, [string, number][]][] = []
  // Writes asked for, in order; what waits for the next write goes with the next one asked for
  // (as the coordinator's write-ahead queue does it, where the leases' writes come too).
  const writes: ((ok: boolean) => void)[] = []
  const withNext: ((ok: boolean) => void)[] = []
  const full: number[] = []
  const reserve = new SpendReserve({
    reserve: (_tenant, familyId, w, keys) => {
      reserved.push([familyId, w, keys.map(([k, n]) => [k, n])])
      return true
    },
    full: (_tenant, _familyId, w) => {
      full.push(w)
      return true
    },
    afterWrite: (then) => {
      const riders = withNext.splice(0)
      writes.push((ok) => {
        for (const r of riders) r(ok)
        then(ok)
      })
    },
    withNextWrite: (then) => void withNext.push(then),
  })
  const sent: boolean[] = []
  /** One ask of `key` decided as the central part decides it: its answer's outcome, once sent. */
  const ask = (key: string): boolean => {
    reserve.before(family, key)
    expect(family.tryAcquire(key)).toBe(true)
    const waits = reserve.admitted(undefined, family, key, clock.now())
    reserve.settle(waits, (ok) => void sent.push(ok))
    return waits
  }
  return { ask, reserved, full, writes, withNext, sent, clock }
}

describe("the coordinator's part's keyed quota answers, written ahead", () => {
  it('holds a key’s first answer until its unit is written; reserves ahead, and the next window’s first, with the next write', () => {
    const { ask, reserved, writes, withNext, sent, clock } = world()
    const chunk = Math.ceil(100 * aheadShare)
    const reservedOf = (window: number): number =>
      Math.max(0, ...reserved.filter(([, w]) => w === window).map(([, , keys]) => keys[0]![1]))
    expect(ask('a')).toBe(true)
    expect(sent).toEqual([])
    // This window's unit and more ahead; the next window's first chunk, in the same write.
    expect(reservedOf(3)).toBeGreaterThanOrEqual(1 + chunk)
    expect(reservedOf(4)).toBeGreaterThanOrEqual(chunk)
    writes.shift()!(true)
    expect(sent).toEqual([true])
    // Asks at a slow pace (one a second), the leases' writes coming between: each answer at
    // once, none asks for a write; what is reserved ahead rides with the leases'.
    let rode = 0
    for (let i = 0; i < 30; i++) {
      clock.advance(1000)
      expect(ask('a')).toBe(false)
      expect(sent).toHaveLength(i + 2)
      rode += withNext.length
      for (const then of withNext.splice(0)) then(true)
    }
    expect(writes).toHaveLength(0)
    expect(rode).toBeGreaterThan(0)
    const before = sent.length
    // Outrunning what is written (many at once): the answer asks for a write, and goes with it.
    let waited = 0
    while (!ask('a')) waited++
    expect(sent).toHaveLength(before + waited)
    expect(writes).toHaveLength(1)
    writes.shift()!(true)
    expect(sent).toHaveLength(before + waited + 1)
    // Never reserved past the key's budget.
    expect(reservedOf(3)).toBeLessThanOrEqual(100)
  })

  it('refuses the answers a failed write was to cover (their units stay counted at the part)', () => {
    const { ask, writes, sent } = world()
    ask('a')
    ask('b')
    expect(writes).toHaveLength(2)
    writes.shift()!(false)
    expect(sent).toEqual([false])
    writes.shift()!(true)
    expect(sent).toEqual([false, true])
    // Raised again at its next admission: written anew, and covered once it is.
    expect(ask('a')).toBe(true)
    writes.shift()!(true)
    expect(sent).toEqual([false, true, true])
  })

  it('counts no more keys of a window than a release may say: past them, the pool marks the window full, and answers wait for that mark alone', () => {
    const { ask, reserved, full, writes, withNext, sent } = world()
    const keysOf = (window: number): Set<string> =>
      new Set(
        reserved.filter(([, w]) => w === window).flatMap(([, , keys]) => keys.map(([k]) => k)),
      )
    const settle = (): void => {
      for (const then of withNext.splice(0)) then(true)
      for (const write of writes.splice(0)) write(true)
    }
    for (let i = 0; i < domainLimits.maxSpentKeys; i++) ask(`k${i}`)
    settle()
    expect(keysOf(3).size).toBe(domainLimits.maxSpentKeys)
    expect(full).toEqual([])
    const n = sent.length
    // One more key: the window is full at the pool (and the next, whose first reservations
    // every key made), and the answer goes once that is written.
    expect(ask('one-more')).toBe(true)
    expect(full).toEqual([3, 4])
    expect(sent).toHaveLength(n)
    settle()
    expect(sent).toHaveLength(n + 1)
    expect(sent.every((ok) => ok)).toBe(true)
    // From then on, new keys of the window go at once; none is counted (or sent to the pool).
    const calls = reserved.filter(([, w]) => w === 3).length
    for (let i = 0; i < 100; i++) expect(ask(`later${i}`)).toBe(false)
    expect(sent).toHaveLength(n + 101)
    expect(reserved.filter(([, w]) => w === 3).length).toBe(calls)
    expect(keysOf(3).has('later0')).toBe(false)
    expect(full).toEqual([3, 4])
  })

  it("marks a full window again when the mark's write failed", () => {
    const { ask, full, writes, withNext, sent } = world()
    for (let i = 0; i < domainLimits.maxSpentKeys; i++) ask(`k${i}`)
    for (const then of withNext.splice(0)) then(true)
    for (const write of writes.splice(0)) write(true)
    const n = sent.length
    expect(ask('one-more')).toBe(true)
    for (const write of writes.splice(0)) write(false)
    expect(sent.slice(n)).toEqual([false])
    // The next new key of the window asks for the mark again, and waits for it.
    expect(ask('again')).toBe(true)
    expect(full.filter((w) => w === 3)).toHaveLength(2)
    for (const then of withNext.splice(0)) then(true)
    for (const write of writes.splice(0)) write(true)
    expect(sent.slice(n)).toEqual([false, true])
  })
})
