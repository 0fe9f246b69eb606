import { describe, expect, it } from 'vitest'
import { RemoteDecisions } from '../../client/remote.js'
import { ManualClock, type DecideMessage } from '../../shared/index.js'

// The pacer of remote decisions' frames (client/remote.ts): an ask leaves in the turn it was
// made while the pacer has room (a lone ask waits one round trip, no more), and frames never
// leave faster than 500 a second sustained, 50 at once: within the coordinator's budget of
// maxDecideFramesPerSec (1,000, bursts of 2,000) over any interval.

function pacer(): { clock: ManualClock; remote: RemoteDecisions; frames: DecideMessage['asks'][] } {
  const clock = new ManualClock(1000)
  const frames: DecideMessage['asks'][] = []
  const remote = new RemoteDecisions((asks) => frames.push(asks), 100_000, clock)
  remote.up()
  return { clock, remote, frames }
}

/** Lets the microtasks queued so far run (a frame made in a turn leaves in one of them). */
const turn = async (): Promise<void> => {
  for (let i = 0; i < 3; i++) await Promise.resolve()
}

describe('remote decisions are paced, not delayed', () => {
  it('sends an ask in the turn it was made, even right after another frame', async () => {
    const { remote, frames } = pacer()
    void remote.ask('key/a', 1)
    await turn()
    expect(frames).toHaveLength(1)
    // The same millisecond: a 2 ms gap between frames used to hold this one back.
    void remote.ask('key/b', 1)
    await turn()
    expect(frames).toHaveLength(2)
    expect(frames[1]).toEqual([[1, 'key/b', 1]])
  })

  it('sends asks of one turn in one frame', async () => {
    const { remote, frames } = pacer()
    for (let i = 0; i < 10; i++) void remote.ask(`key/k${i}`, 1)
    await turn()
    expect(frames).toHaveLength(1)
    expect(frames[0]).toHaveLength(10)
  })

  it('holds frames past its burst until it has room, then sends what waited in one', async () => {
    const { clock, remote, frames } = pacer()
    for (let i = 0; i < 60; i++) {
      void remote.ask(`key/k${i}`, 1)
      await turn()
    }
    expect(frames).toHaveLength(50)
    clock.advance(2)
    await turn()
    expect(frames).toHaveLength(51)
    expect(frames[50]).toHaveLength(10)
  })

  it('never sends more than 50 + 500 a second frames, however often it is asked', async () => {
    const { clock, remote, frames } = pacer()
    // An ask every quarter millisecond, each in a turn of its own, for a second.
    for (let i = 0; i < 4000; i++) {
      void remote.ask(`key/k${i % 100}`, 1)
      await turn()
      if (i % 4 === 3) clock.advance(1)
    }
    clock.advance(5)
    await turn()
    expect(frames.length).toBeLessThanOrEqual(50 + 500 + 3)
    expect(frames.length).toBeGreaterThan(500)
    expect(frames.reduce((n, f) => n + f.length, 0)).toBe(4000)
  })
})

// While no connection is up (client/remote.ts, reconnectWaitMs): an ask waits for the next
// connection, until waitMs after the last one dropped, then is refused; asks already sent on
// the dropped connection are refused at once (the coordinator may have taken their cost).
describe('remote decisions without a connection', () => {
  function outage(waitMs: number): {
    clock: ManualClock
    remote: RemoteDecisions
    frames: DecideMessage['asks'][]
  } {
    const clock = new ManualClock(1000)
    const frames: DecideMessage['asks'][] = []
    const remote = new RemoteDecisions((asks) => frames.push(asks), 100, clock, waitMs)
    return { clock, remote, frames }
  }
  const settled = <T>(p: Promise<T>): { done: boolean; value?: T } => {
    const out: { done: boolean; value?: T } = { done: false }
    void p.then((value) => Object.assign(out, { done: true, value }))
    return out
  }

  it('sends an ask made before the first connection once it is welcomed', async () => {
    const { clock, remote, frames } = outage(1500)
    const a = settled(remote.ask('key/a', 1))
    await turn()
    expect(frames).toHaveLength(0)
    clock.advance(1000)
    remote.up()
    await turn()
    expect(frames).toEqual([[[0, 'key/a', 1]]])
    clock.advance(30)
    remote.answered({ type: 'decided', answers: [[0, 1, 5]] })
    await turn()
    // Its round trip is from its send: the second it waited for a connection is not in it.
    expect(a).toEqual({
      done: true,
      value: { admitted: true, retryAfterMs: 0, remaining: 5, roundTripMs: 30 },
    })
  })

  it('refuses the asks sent on a dropped connection at once, and sends those made after it on the next', async () => {
    const { clock, remote, frames } = outage(1500)
    remote.up()
    const sent = settled(remote.ask('key/a', 1))
    await turn()
    expect(frames).toHaveLength(1)
    remote.down()
    await turn()
    expect(sent).toEqual({ done: true, value: { admitted: false, retryAfterMs: 0 } })
    clock.advance(700)
    const waiting = settled(remote.ask('key/b', 2))
    clock.advance(700)
    await turn()
    expect(waiting.done).toBe(false)
    expect(frames).toHaveLength(1)
    expect(remote.inFlight).toBe(1)
    remote.up()
    await turn()
    expect(frames[1]).toEqual([[1, 'key/b', 2]])
    remote.answered({ type: 'decided', answers: [[1, 0, 250]] })
    await turn()
    expect(waiting).toEqual({
      done: true,
      value: { admitted: false, retryAfterMs: 250, roundTripMs: 0 },
    })
  })

  it('refuses what waited when no connection came within waitMs of the drop, and what is asked later at once', async () => {
    const { clock, remote, frames } = outage(1500)
    remote.up()
    remote.down()
    clock.advance(1000)
    const waiting = settled(remote.ask('key/a', 1))
    clock.advance(499)
    await turn()
    expect(waiting.done).toBe(false)
    clock.advance(1)
    await turn()
    expect(waiting).toEqual({ done: true, value: { admitted: false, retryAfterMs: 0 } })
    // Later in the same outage: refused at once, nothing kept.
    const late = settled(remote.ask('key/b', 1))
    await turn()
    expect(late).toEqual({ done: true, value: { admitted: false, retryAfterMs: 0 } })
    expect(remote.inFlight).toBe(0)
    // The next connection sends none of them; the next outage waits again.
    remote.up()
    await turn()
    expect(frames).toHaveLength(0)
    remote.down()
    const again = settled(remote.ask('key/c', 1))
    remote.up()
    await turn()
    expect(again.done).toBe(false)
    expect(frames).toEqual([[[1, 'key/c', 1]]])
  })

  it('asks again an ask that waited and was refused with a time to ask again before its deadline; never one that did not wait', async () => {
    const { clock, remote, frames } = outage(1500)
    remote.up()
    const plain = settled(remote.ask('key/p', 1))
    await turn()
    remote.answered({ type: 'decided', answers: [[0, 0, 50]] })
    await turn()
    // Never waited: its refusal stands.
    expect(plain).toEqual({
      done: true,
      value: { admitted: false, retryAfterMs: 50, roundTripMs: 0 },
    })
    remote.down()
    clock.advance(1000)
    const a = settled(remote.ask('key/a', 1))
    const b = settled(remote.ask('key/b', 1))
    clock.advance(100)
    remote.up()
    await turn()
    expect(frames[1]).toEqual([
      [1, 'key/a', 1],
      [2, 'key/b', 1],
    ])
    // 1,100 ms after the drop: a's next try (100 ms on) falls before 1,500, b's (450) not.
    remote.answered({
      type: 'decided',
      answers: [
        [1, 0, 100],
        [2, 0, 450],
      ],
    })
    await turn()
    expect(a.done).toBe(false)
    expect(b).toEqual({ done: true, value: { admitted: false, retryAfterMs: 450, roundTripMs: 0 } })
    clock.advance(100)
    await turn()
    expect(frames[2]).toEqual([[1, 'key/a', 1]])
    remote.answered({ type: 'decided', answers: [[1, 1, 3]] })
    await turn()
    expect(a).toEqual({
      done: true,
      value: { admitted: true, retryAfterMs: 0, remaining: 3, roundTripMs: 0 },
    })
    expect(remote.inFlight).toBe(0)
  })

  it('refuses an ask waiting to be asked again when the connection drops', async () => {
    const { clock, remote, frames } = outage(1500)
    const a = settled(remote.ask('key/a', 1))
    remote.up()
    await turn()
    remote.answered({ type: 'decided', answers: [[0, 0, 100]] })
    remote.down()
    await turn()
    expect(a).toEqual({ done: true, value: { admitted: false, retryAfterMs: 0 } })
    clock.advance(100)
    remote.up()
    await turn()
    expect(frames).toHaveLength(1)
  })

  it('refuses at once with waitMs 0, and keeps no more than maxInFlight waiting', async () => {
    const none = outage(0)
    expect(await none.remote.ask('key/a', 1)).toEqual({ admitted: false, retryAfterMs: 0 })
    const { remote } = outage(1500)
    const asks = Array.from({ length: 101 }, (_, i) => settled(remote.ask(`key/k${i}`, 1)))
    await turn()
    expect(asks.filter((a) => a.done)).toHaveLength(1)
    expect(remote.inFlight).toBe(100)
    remote.dropAll()
    await turn()
    expect(asks.every((a) => a.done && a.value?.admitted === false)).toBe(true)
  })
})
