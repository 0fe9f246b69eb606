import { describe, expect, it } from 'vitest'
import { NextLeaseWaits } from '../../client/keyed/next-lease-waits.js'
import { ManualClock } from '../../shared/index.js'

const admitted = { admitted: true, retryAfterMs: 0, window: 8 }
const refused = { admitted: false, retryAfterMs: 0 }

describe('checks waiting at a quota window’s edge', () => {
  it('are decided once a lease ends the edge (after the batch: a microtask), or at their time limit', async () => {
    const clock = new ManualClock()
    const waits = new NextLeaseWaits(clock, 2)
    let decided = 0
    const first = waits.wait(400, () => (decided++, admitted))
    const second = waits.wait(400, () => (decided++, admitted))
    expect(waits.hasRoom).toBe(false)
    // A lease that leaves the window over (a renewal come late): they wait on.
    waits.wake(() => true)
    await Promise.resolve()
    expect(decided).toBe(0)
    waits.wake(() => false)
    expect(decided, 'not inside the batch that brought the lease').toBe(0)
    expect(await first).toEqual(admitted)
    expect(await second).toEqual(admitted)
    expect(decided).toBe(2)
    expect(waits.hasRoom).toBe(true)
    // No lease comes: decided at the limit, as it then stands.
    const late = waits.wait(400, () => refused)
    clock.advance(399)
    let settled = false
    void late.then(() => (settled = true))
    await Promise.resolve()
    expect(settled).toBe(false)
    clock.advance(1)
    expect(await late).toEqual(refused)
  })

  it('are refused at once when the family closes, and their timers are gone', async () => {
    const clock = new ManualClock()
    const waits = new NextLeaseWaits(clock, 10)
    let decided = 0
    const waiting = waits.wait(400, () => (decided++, admitted))
    waits.answerAll(refused)
    expect(await waiting).toEqual(refused)
    clock.advance(1000)
    expect(decided).toBe(0)
  })
})
