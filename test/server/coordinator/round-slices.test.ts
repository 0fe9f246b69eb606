import { describe, expect, it } from 'vitest'
import {
  maxRoundSlices,
  Rounds,
  roundSliceMs,
  type RoundsHost,
} from '../../../server/coordinator/rounds.js'
import type { LeaseBatch } from '../../../server/pool/index.js'
import { ManualClock, type Clock } from '../../../shared/index.js'

/**
 * A keyed family's round runs its hot keys in slices of about `roundSliceMs` of work, a turn
 * apart (#41: a round of 10,000 hot keys kept the coordinator from answering anything for
 * about 400 ms). The pool here is a stand-in that records which ids each slice ran and costs
 * `workMs` of the clock per id; the slicing is the coordinator's.
 */
function setup(keys: number, workMs: number) {
  const manual = new ManualClock()
  let worked = 0
  // The coordinator's clock: the manual one, plus the work done since the test began.
  const clock: Clock = {
    now: () => manual.now() + worked,
    wallNow: () => manual.wallNow() + worked,
    setTimeout: (callback, delayMs) => manual.setTimeout(callback, delayMs),
    setInterval: (callback, periodMs) => manual.setInterval(callback, periodMs),
  }
  const family = 'key/*'
  const ids = [family, ...Array.from({ length: keys }, (_, i) => `key/k${i}`)]
  const slices: string[][] = []
  const sent: (readonly LeaseBatch[])[] = []
  const observed: number[] = []
  let rounds = 0
  const state = { mayGrant: true, closed: false }
  const batch = (n: number): LeaseBatch[] => [{ n } as unknown as LeaseBatch]
  const host = {
    pool: {
      familyIds: () => ids,
      round: (id: string) => {
        slices.push([id])
        worked += workMs
        return batch(slices.length)
      },
      roundSome: (of: readonly string[], from: number, _nowMs: number, more: () => boolean) => {
        const ran: string[] = []
        let i = from
        do {
          ran.push(of[i++]!)
          worked += workMs
        } while (i < of.length && more())
        slices.push(ran)
        return { batches: batch(slices.length), next: i }
      },
      hasResource: () => true,
      windowEndMs: () => undefined,
    },
    settings: {
      lookup: (id: string) =>
        id === family
          ? { refreshMs: 1000, family: { role: 'family' } }
          : { refreshMs: 1000, family: { role: 'key' } },
      upstream: undefined,
    },
    metrics: {
      rounds: { inc: () => rounds++ },
      roundSeconds: { observe: (s: number) => observed.push(s) },
    },
    get closed() {
      return state.closed
    },
    mayGrant: () => state.mayGrant,
    sendLeases: (batches: readonly LeaseBatch[]) => sent.push(batches),
  } as unknown as RoundsHost
  const r = new Rounds(clock, () => 0, host)
  return {
    manual,
    r,
    family,
    ids,
    slices,
    sent,
    observed,
    state,
    rounds: () => rounds,
  }
}

describe('a keyed family’s round in slices', () => {
  it('runs every hot key once, the family first, in slices of about roundSliceMs a turn apart, each sent as it ends', () => {
    const workMs = 0.3
    const { manual, r, family, ids, slices, sent, observed, rounds } = setup(20, workMs)
    r.run(family)
    // The first slice now, the family first: ids until a slice's work reaches roundSliceMs.
    const perSlice = Math.ceil(roundSliceMs / workMs)
    expect(slices).toEqual([ids.slice(0, perSlice)])
    expect(sent).toHaveLength(1)
    expect(rounds()).toBe(0) // the round is not over
    manual.advance(0)
    expect(slices.flat()).toEqual(ids)
    expect(slices).toHaveLength(Math.ceil(ids.length / perSlice))
    for (const s of slices) expect(s.length * workMs).toBeLessThan(roundSliceMs + workMs)
    expect(sent).toHaveLength(slices.length)
    // One round counted, its seconds the slices' work together.
    expect(rounds()).toBe(1)
    expect(observed).toHaveLength(1)
    expect(observed[0]! * 1000).toBeCloseTo(ids.length * workMs, 6)
  })

  it('takes at most maxRoundSlices slices, longer ones when the round is long (each slice is an ack per client)', () => {
    const { manual, r, family, ids, slices, rounds } = setup(2000, 0.3)
    r.run(family)
    manual.advance(0)
    expect(slices.flat()).toEqual(ids)
    // 8: a few rounds a second (the period, prompts) stay within a client's 50 messages a second.
    expect(slices.length).toBeLessThanOrEqual(Math.min(8, maxRoundSlices))
    expect(slices.length).toBeGreaterThan(1)
    expect(rounds()).toBe(1)
  })

  it('is whole, in one turn, on a clock that stands still (as the manual clock of every other test)', () => {
    const { r, family, ids, slices, rounds } = setup(500, 0)
    r.run(family)
    expect(slices).toEqual([ids])
    expect(rounds()).toBe(1)
  })

  it('asked again while under way, runs once more after it ends, never two at once', () => {
    const { manual, r, family, ids, slices, rounds } = setup(20, 0.3)
    r.ensure(family)
    r.run(family)
    r.run(family) // a prompt, while the first is under way
    r.run(family)
    const firstSlices = slices.length
    expect(firstSlices).toBe(1)
    manual.advance(0)
    // The first round, then one more (however many asks came meanwhile), each whole.
    expect(rounds()).toBe(2)
    expect(slices.flat()).toEqual([...ids, ...ids])
  })

  it('stops when this coordinator may no longer grant (a step-down), and on dropAll', () => {
    const a = setup(20, 0.3)
    a.r.run(a.family)
    a.state.mayGrant = false
    a.manual.advance(0)
    expect(a.slices).toHaveLength(1)
    expect(a.rounds()).toBe(0)

    const b = setup(20, 0.3)
    b.r.ensure(b.family)
    b.r.run(b.family)
    b.r.dropAll()
    b.manual.advance(0)
    expect(b.slices).toHaveLength(1)
    expect(b.manual.pending).toBe(0)
  })
})
