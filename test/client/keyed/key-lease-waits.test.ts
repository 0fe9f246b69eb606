import { describe, expect, it } from 'vitest'
import { KeyLeaseWaits } from '../../../client/keyed/key-lease-waits.js'
import { KeyedFamily } from '../../../client/keyed/index.js'
import { resolveKeyedOptions } from '../../../client/options.js'
import { ManualClock, type LeaseGrant } from '../../../shared/index.js'

describe("checks waiting for a key's own lease", () => {
  it("settle at the key's next lease, after the batch (a microtask), and only that key's", async () => {
    const clock = new ManualClock()
    const waits = new KeyLeaseWaits(clock, 10)
    const settled: string[] = []
    void waits.wait('a', 500)!.then(() => settled.push('a'))
    void waits.wait('b', 500)!.then(() => settled.push('b'))
    waits.wake('a')
    // Not within the call: the rest of the batch is applied first.
    expect(settled).toEqual([])
    await Promise.resolve()
    await Promise.resolve()
    expect(settled).toEqual(['a'])
    expect(waits.size).toBe(1)
    // A lease of a key nobody waits for does nothing.
    waits.wake('c')
    await Promise.resolve()
    expect(waits.size).toBe(1)
  })

  it('settle by time when no lease comes, and all at once at the close', async () => {
    const clock = new ManualClock()
    const waits = new KeyLeaseWaits(clock, 10)
    const settled: string[] = []
    void waits.wait('a', 500)!.then(() => settled.push('a'))
    clock.advance(499)
    await Promise.resolve()
    expect(settled).toEqual([])
    clock.advance(1)
    await Promise.resolve()
    expect(settled).toEqual(['a'])
    void waits.wait('b', 500)!.then(() => settled.push('b'))
    void waits.wait('b', 500)!.then(() => settled.push('b'))
    waits.settleAll()
    await Promise.resolve()
    expect(settled).toEqual(['a', 'b', 'b'])
    expect(waits.size).toBe(0)
    // Their timers went with them: nothing settles twice.
    clock.advance(1000)
    await Promise.resolve()
    expect(settled).toEqual(['a', 'b', 'b'])
  })

  it("settle all at the family's first share, after the batch (a microtask)", async () => {
    const clock = new ManualClock()
    const waits = new KeyLeaseWaits(clock, 10)
    const settled: string[] = []
    void waits.wait('a', 500)!.then(() => settled.push('a'))
    void waits.wait('b', 500)!.then(() => settled.push('b'))
    waits.wakeAll()
    expect(settled).toEqual([])
    await Promise.resolve()
    await Promise.resolve()
    expect(settled).toEqual(['a', 'b'])
    expect(waits.size).toBe(0)
  })

  // The coordinator's part, made by a crowded family's first remote asks (server/coordinator/
  // central.ts), holds nothing until its first share: its asks wait for that share, and are
  // decided as it comes, not when the wait ends.
  it("are woken by a family's first share of more than 0, not by a lease of nothing, and only while the family is young", async () => {
    const clock = new ManualClock()
    const owner = { requestEarlyReport: () => undefined, drained: () => undefined }
    const family = new KeyedFamily('k', resolveKeyedOptions('k', {}), clock, clock, owner)
    const lease = (capacity: number): LeaseGrant => ({
      resource: 'k/*',
      kind: 'rate',
      capacity,
      burst: capacity,
      ttlMs: 10_000,
      refreshMs: 1000,
      safeCapacity: capacity,
      safeHoldMs: 0,
      family: { kind: 'rate', capacity: 10, burst: 10 },
    })
    expect(family.awaitsFirstShare('a', 500)).toBe(true)
    let settled = false
    void family.waitForKeyLease('a', 500)!.then(() => (settled = true))
    family.applyFamilyLease(lease(0))
    await Promise.resolve()
    await Promise.resolve()
    expect(settled).toBe(false)
    expect(family.awaitsFirstShare('a', 500)).toBe(true)
    clock.advance(100)
    family.applyFamilyLease(lease(1))
    await Promise.resolve()
    await Promise.resolve()
    expect(settled).toBe(true)
    // Held a share once: it never waits for a first one again.
    expect(family.awaitsFirstShare('b', 500)).toBe(false)
    // Nor does a family older than the wait that never held one.
    const old = new KeyedFamily('k', resolveKeyedOptions('k', {}), clock, clock, owner)
    clock.advance(500)
    expect(old.awaitsFirstShare('a', 500)).toBe(false)
  })

  it('are bounded: past the most that may wait, a check is not held', () => {
    const clock = new ManualClock()
    const waits = new KeyLeaseWaits(clock, 2)
    expect(waits.wait('a', 500)).toBeDefined()
    expect(waits.wait('b', 500)).toBeDefined()
    expect(waits.wait('c', 500)).toBeUndefined()
    waits.settleAll()
    expect(waits.wait('c', 500)).toBeDefined()
  })
})
