import { describe, expect, it } from 'vitest'
import { KeyedFamily } from '../../../client/keyed/index.js'
import { resolveKeyedOptions } from '../../../client/options.js'
import { SpendReserve, aheadShare } from '../../../server/coordinator/spend-reserve.js'
import { ManualClock } from '../../../shared/index.js'

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
  const writes: ((ok: boolean) => void)[] = []
  const reserve = new SpendReserve({
    reserve: (_tenant, familyId, w, keys) => {
      reserved.push([familyId, w, keys.map(([k, n]) => [k, n])])
      return true
    },
    afterWrite: (then) => void writes.push(then),
  })
  const sent: boolean[] = []
  /** One ask of `key` decided as the central part decides it: its answer's outcome, once sent. */
  const ask = (key: string): boolean => {
    reserve.before(family, key)
    expect(family.tryAcquire(key)).toBe(true)
    const waits = reserve.admitted(undefined, family, key)
    reserve.settle(waits, (ok) => void sent.push(ok))
    return waits
  }
  return { ask, reserved, writes, sent }
}

describe("the coordinator's part's keyed quota answers, written ahead", () => {
  it('holds a key’s first answer until its unit is written, reserving a chunk ahead so the next go at once', () => {
    const { ask, reserved, writes, sent } = world()
    const chunk = Math.ceil(100 * aheadShare)
    expect(ask('a')).toBe(true)
    expect(sent).toEqual([])
    expect(reserved).toEqual([['k/*', 3, [['a', 1 + chunk]]]])
    writes.shift()!(true)
    expect(sent).toEqual([true])
    // Within what is written: at once, nothing new written until half a chunk is left.
    for (let i = 2; i <= 1 + Math.floor(chunk / 2); i++) expect(ask('a')).toBe(false)
    expect(sent).toHaveLength(1 + Math.floor(chunk / 2))
    expect(writes).toHaveLength(0)
    // Less than half a chunk left: reserved ahead, the answer still at once.
    expect(ask('a')).toBe(false)
    expect(writes).toHaveLength(1)
    expect(reserved.at(-1)![2][0]![1]).toBeGreaterThan(1 + chunk)
    // Past what is written while that write is in flight: waits for it.
    const before = sent.length
    let waited = 0
    while (!ask('a')) waited++
    expect(sent).toHaveLength(before + waited)
    writes.shift()!(true)
    expect(sent).toHaveLength(before + waited + 1)
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
})
