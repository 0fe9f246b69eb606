import fc from 'fast-check'
import { describe, expect, it } from 'vitest'
import { newLimitState, refreshLimit } from '../../../client/keyed/limit-keys.js'
import { FamilyShares } from '../../../client/keyed/shares.js'
import type { KeyState } from '../../../client/keyed/key-state.js'
import { ManualClock, type LeaseGrant } from '../../../shared/index.js'
import { worstInterval } from '../../helpers/intervals.js'

// A keyed family's default share moving between processes while a key sits idle at some of
// them: a process refreshes a key's bucket when it next touches it (the family's epoch moved),
// not when the share moves. What each bucket did in between must be as if the move came when
// it came: a share that fell while the key was idle may not have earned at its old rate, nor
// kept its whole old burst, while a riser's fresh part filled.

const ratePerSec = 10
const burst = 20

function grant(share: number): LeaseGrant {
  return {
    resource: 'k/*',
    kind: 'rate',
    capacity: share,
    burst: share,
    ttlMs: 1e12,
    refreshMs: 1000,
    safeCapacity: share,
    safeHoldMs: 0,
    family: { kind: 'rate', capacity: ratePerSec, burst },
  }
}

/** One process: its family shares and its bucket of the key, made on its first touch. */
class Process {
  readonly shares: FamilyShares
  state: KeyState | undefined = undefined
  constructor(clock: ManualClock) {
    this.shares = new FamilyShares(clock)
  }
  /** What a request does: the key's state made or refreshed, then a take. */
  take(cost: number): boolean {
    if (this.state === undefined) this.state = newLimitState(this.shares, 'a')
    else if (this.state.epoch !== this.shares.epoch) refreshLimit(this.shares, this.state)
    return this.state.bucket.tryTake(cost)
  }
  all(): number {
    let n = 0
    while (this.take(1)) n++
    return n
  }
}

/** Applies `to` (a share per process): the ones that fall first, as the coordinator's acks order it. */
function move(processes: Process[], from: number[], to: number[]): void {
  const order = processes.map((_, i) => i).sort((a, b) => to[a]! - from[a]! - (to[b]! - from[b]!))
  for (const i of order)
    if (to[i] !== from[i]) processes[i]!.shares.applyLease(grant(to[i]!), grant(to[i]!).family!)
}

describe('a key idle while its default share moves', () => {
  it('a gateway joins two whose key was full and idle: the three never hold more than one burst', () => {
    const clock = new ManualClock()
    const [g1, g2, g3] = [new Process(clock), new Process(clock), new Process(clock)]
    // Two gateways, half each, since long ago: the key full at both, then idle.
    move([g1, g2, g3], [0, 0, 0], [0.5, 0.5, 0])
    clock.advance(10_000)
    expect(g1.take(0) && g2.take(0)).toBe(true)
    clock.advance(10_000)
    // A third joins: a third each. The key is touched nowhere for a refill time.
    move([g1, g2, g3], [0.5, 0.5, 0], [1 / 3, 1 / 3, 1 / 3])
    clock.advance((burst / ratePerSec) * 1000)
    const admitted = g1.all() + g2.all() + g3.all()
    expect(admitted).toBeLessThanOrEqual(burst)
  })

  it('processes whose shares move while the key is idle at some never admit more than one bucket (property)', () => {
    const sets = [
      [1, 0, 0],
      [0.5, 0.5, 0],
      [1 / 3, 1 / 3, 1 / 3],
      [0, 0.5, 0.5],
      [0.25, 0.25, 0.5],
      [0, 0, 1],
    ]
    const wait = fc.constantFrom(0, 0.1, 0.25, 0.5, 1, 2)
    const step = fc.oneof(
      fc.record({ wait, at: fc.constantFrom(0, 1, 2), all: fc.boolean() }),
      fc.record({ wait, to: fc.nat(sets.length - 1) }),
      // A renewal: the same share again, as the coordinator sends every few seconds.
      fc.record({ wait, renew: fc.constantFrom(0, 1, 2) }),
    )
    fc.assert(
      fc.property(fc.array(step, { minLength: 1, maxLength: 60 }), (steps) => {
        const clock = new ManualClock()
        const processes = [new Process(clock), new Process(clock), new Process(clock)]
        let shares = [0, 0, 0]
        const admitted: number[] = []
        for (const s of steps) {
          clock.advance(Math.round(s.wait * (burst / ratePerSec) * 1000))
          if ('to' in s) {
            move(processes, shares, sets[s.to]!)
            shares = sets[s.to]!
            continue
          }
          if ('renew' in s) {
            const share = shares[s.renew]!
            if (share > 0) processes[s.renew]!.shares.applyLease(grant(share), grant(share).family!)
            continue
          }
          const p = processes[s.at]!
          do {
            if (!p.take(1)) break
            admitted.push(clock.now())
          } while (s.all)
        }
        expect(worstInterval(admitted, ratePerSec)).toBeLessThanOrEqual(burst + 1e-6)
      }),
    )
  })
})

describe('what a key never seen here starts with (FamilyShares.untrackedLevel)', () => {
  // The burst refills in 2 s (20 at 10/s): a share that rose from nothing earns it over 2 s.
  const refillMs = (burst / ratePerSec) * 1000

  it('a renewal of the same share does not count the time since the rise twice', () => {
    const clock = new ManualClock()
    const shares = new FamilyShares(clock)
    shares.applyLease(grant(1 / 3), grant(1 / 3).family!)
    clock.advance(refillMs / 4)
    shares.applyLease(grant(1 / 3), grant(1 / 3).family!)
    expect(shares.untrackedLevel()).toBeCloseTo(1 / 12, 9)
    clock.advance(refillMs / 4)
    // Half the refill time since the rise: half the share (5/24 before: earned again from the
    // rise after the renewal had banked it).
    expect(shares.untrackedLevel()).toBeCloseTo(1 / 6, 9)
    shares.applyLease(grant(1 / 3), grant(1 / 3).family!)
    clock.advance(refillMs / 2)
    expect(shares.untrackedLevel()).toBeCloseTo(1 / 3, 9)
  })

  it('after a fall, never more than the fallen share earns from what was kept', () => {
    const clock = new ManualClock()
    const shares = new FamilyShares(clock)
    shares.applyLease(grant(1 / 2), grant(1 / 2).family!)
    clock.advance(refillMs / 4)
    shares.applyLease(grant(1 / 3), grant(1 / 3).family!)
    expect(shares.untrackedLevel()).toBeCloseTo(1 / 8, 9)
    clock.advance(refillMs / 4)
    // A bucket of that share holding 1/8 at the fall holds 1/8 + 1/3 x 1/4 now; the level
    // says no more (0.229 before: the time before the fall earned twice).
    expect(shares.untrackedLevel()).toBeLessThanOrEqual(1 / 8 + 1 / 12 + 1e-9)
    expect(shares.untrackedLevel()).toBeGreaterThan(1 / 8)
  })
})
