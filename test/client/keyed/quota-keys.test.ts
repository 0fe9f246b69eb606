import fc from 'fast-check'
import { describe, expect, it } from 'vitest'
import type { KeyState } from '../../../client/keyed/key-state.js'
import { quotaKeys } from '../../../client/keyed/quota-keys.js'
import { FamilyShares } from '../../../client/keyed/shares.js'
import { CoarseClock, ManualClock, shareOfKey, type LeaseGrant } from '../../../shared/index.js'

// A keyed quota's default share of the next window, sent ahead of the edge (server/pool/ahead.ts):
// in force from its start as this process places it, and between this window's end and that
// start (the coordinator's edge lies somewhere in it) a key's check is spent of both windows.

const budget = 100
const family = { kind: 'quota' as const, capacity: budget, burst: budget }

/** A family lease of `window` ending `endsInMs` from now, with the next window's share ahead. */
function grant(
  window: number,
  share: number,
  endsInMs: number,
  next?: { share: number; startsInMs: number; endsInMs: number },
): LeaseGrant {
  return {
    resource: 'k/*',
    kind: 'quota',
    capacity: share,
    burst: share,
    ttlMs: next?.endsInMs ?? endsInMs,
    refreshMs: 1000,
    safeCapacity: 0,
    safeHoldMs: 0,
    family,
    window: {
      index: window,
      endsInMs,
      quota: 1,
      lengthMs: 60_000,
      ...(next === undefined
        ? {}
        : {
            next: {
              index: window + 1,
              capacity: next.share,
              startsInMs: next.startsInMs,
              endsInMs: next.endsInMs,
            },
          }),
    },
  }
}

/** One process's family and one key, checked as the family checks it (refreshed, then taken). */
class Process {
  readonly shares: FamilyShares
  state: KeyState | undefined = undefined
  constructor(readonly clock: ManualClock) {
    this.shares = new FamilyShares(clock)
  }
  lease(g: LeaseGrant): void {
    this.shares.applyLease(g, g.family!)
  }
  /** The key's own lease comes (it went hot): in force from now, for its `ttlMs`. */
  keyLease(g: LeaseGrant): KeyState {
    const state = this.state!
    state.lease = g
    state.leaseUntilMs = this.clock.now() + g.ttlMs
    state.epoch = -1
    return state
  }
  take(cost = 1): boolean {
    if (this.state === undefined) this.state = quotaKeys.newState(this.shares, 'a')
    else if (this.state.epoch !== this.shares.epoch || this.clock.now() >= this.state.changeAtMs)
      quotaKeys.refresh(this.shares, this.state)
    return quotaKeys.take(this.shares, this.state, cost)
  }
}

/** A key's own lease of `window` (a quota's), and its block of the next window ahead if given. */
function keyLease(
  window: number,
  capacity: number,
  endsInMs: number,
  next?: { share: number; startsInMs: number; endsInMs: number },
): LeaseGrant {
  return { ...grant(window, capacity, endsInMs, next), resource: 'k/a', family: undefined }
}

/** A process holding a twentieth of every key of window 7, the same of window 8 ahead, one unit of key a spent. */
function holdingKeyA(clock: ManualClock): Process {
  const p = new Process(clock)
  p.lease(grant(7, 0.05, 1_000, { share: 0.05, startsInMs: 1_010, endsInMs: 6_000 }))
  expect(p.take()).toBe(true)
  return p
}

describe('a keyed quota’s next window sent ahead', () => {
  it('spends a check between the windows of both, carries it into the next, and keeps each window to its share wherever the coordinator’s edge lies', () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 1, max: 60 }), // the window ending: its share, % of the budget
        fc.integer({ min: 1, max: 60 }), // the next window's share sent ahead
        fc.integer({ min: 1, max: 40 }), // the gap between this window's end and the next's start, ms
        fc.double({ min: 0, max: 1, noNaN: true }), // where in the gap the coordinator's edge is
        fc.integer({ min: 0, max: 60 }), // spent of the window ending before its last moments
        fc.array(fc.tuple(fc.integer({ min: 0, max: 100 }), fc.integer({ min: 1, max: 3 })), {
          minLength: 1,
          maxLength: 60,
        }), // checks around the edge: ms after 20 ms before this window's end, and cost
        (sharePct, nextPct, gapMs, edgeAt, before, checks) => {
          const clock = new ManualClock(0)
          const p = new Process(clock)
          const endMs = 1_000
          const startMs = endMs + gapMs
          p.lease(
            grant(7, sharePct / 100, endMs, {
              share: nextPct / 100,
              startsInMs: startMs,
              endsInMs: startMs + 5_000,
            }),
          )
          const edgeMs = endMs + edgeAt * gapMs
          const shareUnits = shareOfKey('quota', sharePct / 100, budget)
          const nextUnits = shareOfKey('quota', nextPct / 100, budget)
          // By the coordinator's edge, and by this process's windows (its end, the next's start).
          const spent = [0, 0]
          const here = [0, 0]
          const check = (cost: number): boolean => {
            const nowMs = clock.now()
            const inGap = nowMs >= endMs && nowMs < startMs
            const room = here[0]! + cost <= shareUnits && here[1]! + cost <= nextUnits
            const admitted = p.take(cost)
            // Between the windows: admitted exactly when both shares have room.
            if (inGap) expect(admitted).toBe(room)
            if (admitted) {
              spent[nowMs < edgeMs ? 0 : 1]! += cost
              if (nowMs < startMs) here[0]! += cost
              if (nowMs >= endMs) here[1]! += cost
            }
            return admitted
          }
          for (let i = 0; i < before; i++) check(1)
          clock.advance(endMs - 20)
          for (const t of checks
            .map(([ms]) => ms)
            .sort((x, y) => x - y)
            .entries()) {
            clock.advance(endMs - 20 + t[1] - clock.now())
            check(checks[t[0]]![1])
          }
          // Then the next window, spent to the end of its share.
          clock.advance(Math.max(0, startMs + 50 - clock.now()))
          while (check(1));
          expect(spent[0]).toBeLessThanOrEqual(shareUnits)
          expect(spent[1]).toBeLessThanOrEqual(nextUnits)
        },
      ),
      { numRuns: Number(process.env.FC_NUM_RUNS ?? 300) },
    )
  })

  it('admits a check between the windows while both shares have room, not once either is spent', () => {
    const clock = new ManualClock(0)
    const p = new Process(clock)
    p.lease(grant(7, 0.05, 1_000, { share: 0.03, startsInMs: 1_010, endsInMs: 6_000 }))
    for (let i = 0; i < 2; i++) expect(p.take()).toBe(true)
    clock.advance(1_000)
    // Between the windows: 3 of this window's 5 left, 3 of the next's: 3 admitted, of both.
    expect(p.take(2)).toBe(true)
    expect(p.take()).toBe(true)
    expect(p.take()).toBe(false)
    expect(quotaKeys.lapsed(p.shares, p.state!)).toBe(true)
    clock.advance(10)
    // The next window's share in force: 3 of it spent already.
    expect(p.take()).toBe(false)
    expect(p.shares.windowIndex).toBe(8)
    expect(p.shares.aheadInForce).toBe(true)
    expect(p.state!.used).toBe(3)
  })

  it('spends nothing of the next window before its start, and nothing of this one after its end but what fits the next', () => {
    const clock = new ManualClock(0)
    const p = new Process(clock)
    p.lease(grant(7, 0.05, 1_000, { share: 0.1, startsInMs: 1_010, endsInMs: 6_000 }))
    for (let i = 0; i < 5; i++) expect(p.take()).toBe(true)
    // This window's share spent: nothing more before the next one's start, in the gap too.
    expect(p.take()).toBe(false)
    clock.advance(1_005)
    expect(p.take()).toBe(false)
    clock.advance(5)
    for (let i = 0; i < 10; i++) expect(p.take()).toBe(true)
    expect(p.take()).toBe(false)
  })

  it('never opens the next window early on a coarse hot clock that lags the real time (found in a fault run: 6-26 ms early)', () => {
    const source = new ManualClock(0)
    // Ticks every 50 ms: its reading lags the real time by up to 50 ms.
    const hot = new CoarseClock(source, 50)
    const shares = new FamilyShares(hot)
    source.advance(40)
    expect(hot.now()).toBe(0)
    // Sent ahead: the next window opens 100 ms from now (real time 140).
    const g = grant(7, 0.05, 60, { share: 0.05, startsInMs: 100, endsInMs: 5_000 })
    shares.applyLease(g, g.family!)
    source.advance(80)
    // Real time 120, the reading 100: not open yet.
    expect(hot.now()).toBe(100)
    expect(shares.advance(hot.now())).toBe(false)
    expect(shares.windowIndex).toBe(7)
    source.advance(30)
    expect(shares.advance(hot.now())).toBe(true)
    expect(shares.windowIndex).toBe(8)
    hot.close()
  })

  it('takes no share from a late lease of the window that ended here', () => {
    const clock = new ManualClock(0)
    const p = new Process(clock)
    p.lease(grant(7, 0.05, 1_000, { share: 0.02, startsInMs: 1_010, endsInMs: 6_000 }))
    clock.advance(1_020)
    expect(p.take()).toBe(true)
    expect(p.shares.windowIndex).toBe(8)
    // Sent before the edge, come after the next window's start here: its share is not the next's.
    p.lease(grant(7, 0.05, 0, { share: 0.02, startsInMs: 0, endsInMs: 4_980 }))
    expect(p.shares.share).toBe(0.02)
    expect(p.take()).toBe(true)
    expect(p.take()).toBe(false)
  })

  it('spends a key leased on its own by its block of the next window sent ahead, and a check between the windows of both blocks', () => {
    const clock = new ManualClock(0)
    const p = holdingKeyA(clock)
    // The key's lease of window 7 (40 in all), with its block of window 8 (3) ahead; the
    // lease lasts to that window's end (client.ts places it so).
    const state = p.keyLease(
      keyLease(7, 40, 1_000, { share: 3, startsInMs: 1_010, endsInMs: 6_000 }),
    )
    expect(p.take(37)).toBe(true)
    expect(p.take(3)).toBe(false)
    clock.advance(1_000)
    // Between the windows: 2 of window 7's 40 left, 3 of the block ahead: 2 more, of both.
    expect(p.take(2)).toBe(true)
    expect(p.take()).toBe(false)
    clock.advance(10)
    // Window 8: the block ahead, 2 of it spent already; not the family's share (5 of 100).
    expect(p.take()).toBe(true)
    expect(p.take()).toBe(false)
    expect(quotaKeys.leaseOf(p.shares, 'a', state)).toMatchObject({ source: 'key', window: 8 })
  })

  it('holds a key leased on its own in the window before at 0 of the share sent ahead, as at an edge, until its own lease of the window comes', () => {
    const clock = new ManualClock(0)
    const p = holdingKeyA(clock)
    const state = p.keyLease(keyLease(7, 40, 1_000))
    expect(p.take(10)).toBe(true)
    clock.advance(1_010)
    // The share of window 8 in force here, the key's lease of it not come: none of the share.
    expect(p.take()).toBe(false)
    expect(quotaKeys.lapsed(p.shares, state)).toBe(true)
    expect(quotaKeys.wantsOwnLease(p.shares, state, 'a', 100, 1)).toBe(false)
    expect(quotaKeys.msUntil(p.shares, state, 1)).toBe(2_000)
    // Its lease of window 8 comes (with the share's first lease there).
    p.keyLease(keyLease(8, 30, 5_000))
    expect(p.take(30)).toBe(true)
    expect(p.take()).toBe(false)
  })
})
