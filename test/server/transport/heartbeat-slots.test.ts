import fc from 'fast-check'
import { describe, expect, it } from 'vitest'
import { HeartbeatSlots } from '../../../server/transport/heartbeat-slots.js'

describe('HeartbeatSlots', () => {
  it('visits every item exactly once per round of slots, a slot at a time', () => {
    const slots = new HeartbeatSlots<number>(10)
    for (let i = 0; i < 1000; i++) slots.add(i)
    const seen = new Map<number, number>()
    for (let tick = 0; tick < 10; tick++) {
      const due = slots.nextDue()
      expect(due.size).toBe(100)
      for (const item of due) seen.set(item, (seen.get(item) ?? 0) + 1)
    }
    expect(seen.size).toBe(1000)
    expect([...seen.values()].every((n) => n === 1)).toBe(true)
  })

  it('keeps each item in its slot: visits are one whole round apart, whatever else comes and goes', () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 1, max: 12 }),
        fc.array(fc.tuple(fc.boolean(), fc.integer({ min: 0, max: 40 })), { maxLength: 300 }),
        (slotCount, ops) => {
          const slots = new HeartbeatSlots<number>(slotCount)
          const lastVisit = new Map<number, number>()
          for (let tick = 0; tick < ops.length; tick++) {
            const [add, item] = ops[tick]!
            if (add) slots.add(item)
            else {
              slots.delete(item)
              lastVisit.delete(item)
            }
            for (const visited of slots.nextDue()) {
              const last = lastVisit.get(visited)
              if (last !== undefined) expect(tick - last).toBe(slotCount)
              lastVisit.set(visited, tick)
            }
          }
        },
      ),
    )
  })

  it('keeps the slots even under churn: a new item goes where there are fewest', () => {
    const slots = new HeartbeatSlots<number>(4)
    for (let i = 0; i < 40; i++) slots.add(i)
    // Empty one slot entirely (the items dealt to it), then add ten more.
    const first = [...slots.nextDue()]
    for (const item of first) slots.delete(item)
    for (let i = 100; i < 110; i++) slots.add(i)
    const sizes = [0, 1, 2, 3].map(() => slots.nextDue().size)
    expect(sizes.sort()).toEqual([10, 10, 10, 10])
    expect(slots.size).toBe(40)
  })

  it('never visits a deleted item, and ignores adding an item twice', () => {
    const slots = new HeartbeatSlots<string>(3)
    slots.add('a')
    slots.add('a')
    slots.add('b')
    slots.delete('a')
    slots.delete('zzz')
    const visited = [0, 1, 2].flatMap(() => [...slots.nextDue()])
    expect(visited).toEqual(['b'])
    expect(slots.size).toBe(1)
  })

  it('cuts a period into ticks of about 100 ms, at most 150 of them', () => {
    expect(HeartbeatSlots.countFor(15_000)).toBe(150)
    expect(HeartbeatSlots.countFor(60_000)).toBe(150)
    expect(HeartbeatSlots.countFor(1000)).toBe(10)
    expect(HeartbeatSlots.countFor(10)).toBe(1)
    expect(() => new HeartbeatSlots(0)).toThrow(RangeError)
  })
})
