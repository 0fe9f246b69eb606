import { describe, expect, it } from 'vitest'
import { KeyLeaseWaits } from '../../../client/keyed/key-lease-waits.js'
import { ManualClock } from '../../../shared/index.js'

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
