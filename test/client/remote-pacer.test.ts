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
