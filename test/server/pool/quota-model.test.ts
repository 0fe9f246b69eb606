import fc from 'fast-check'
import { describe, expect, it } from 'vitest'
import type { ResourceSettings } from '../../../server/config/index.js'
import { MemoryLedger } from '../../../server/ledger/index.js'
import { Pool, type LeaseBatch } from '../../../server/pool/index.js'
import type { LeaseGrant } from '../../../shared/index.js'
import { resourceSettings } from '../../helpers/settings.js'

/**
 * Model-based test of quotas in the pool, against simulated client
 * processes that spend as client/enforcer.ts's QuotaEnforcer does: a budget
 * per window (the lease's capacity, what was used included), spent until
 * the lease's window time runs out, used reset when a lease of a new window
 * comes. Random joins, reports, rounds, deliveries (acks lost, or held while
 * what was used does not fit a smaller budget), spending, client crashes
 * (what they were given stays spent), coordinator crashes restored from the
 * ledger, and time across windows.
 *
 * The check: in every window, Σ over processes of what they used ≤ capacity.
 */

const R = 'quota'
const capacity = 50
const windowMs = 10_000
const settings: ResourceSettings = resourceSettings({
  id: R,
  kind: 'quota',
  capacity,
  burst: capacity,
  refreshMs: 200,
  graceMs: 100,
  safeCapacity: 0,
  safeHoldMs: 0,
  surplus: 'hold',
  quotaWindow: { kind: 'fixed', ms: windowMs },
})
const ids = ['p', 'q', 'r'] as const
type Id = (typeof ids)[number]

class Process {
  connected = false
  crashed = false
  generation = 0
  inFlight: { batch: LeaseBatch; sentMs: number }[] = []
  lease: { grant: LeaseGrant; receivedMs: number } | undefined
  window: number | undefined
  used = 0
  pendingAck: number | undefined
  /** Released while disconnected: said on the next connection, before any report (client.ts). */
  unreleased = false
  /** Released, and not taken up again yet: it reports nothing of the quota. */
  released = false
  wants = 0
  constructor(readonly id: Id) {}

  /** The next window's budget sent ahead: in force from `startAtMs` (client/enforcer.ts). */
  next: { index: number; capacity: number; startAtMs: number; endAtMs: number } | undefined

  /** The budget left now: the lease's, while its window time lasts; past it, the next window's sent ahead. */
  left(nowMs: number): number {
    this.advance(nowMs)
    const l = this.lease
    if (l === undefined || l.grant.window === undefined) return 0
    if (nowMs >= l.receivedMs + l.grant.window.endsInMs) return 0
    return Math.max(0, l.grant.capacity - this.used)
  }

  /** Past the window's time, and the next one's sent ahead open: that one's budget, nothing used. */
  advance(nowMs: number): void {
    const l = this.lease
    const n = this.next
    if (l === undefined || l.grant.window === undefined || n === undefined) return
    if (nowMs < l.receivedMs + l.grant.window.endsInMs || nowMs < n.startAtMs) return
    this.window = n.index
    this.used = 0
    this.lease = {
      grant: {
        ...l.grant,
        capacity: n.capacity,
        window: { ...l.grant.window, index: n.index, endsInMs: n.endAtMs - nowMs, next: undefined },
      },
      receivedMs: nowMs,
    }
    this.next = undefined
  }
}

class World {
  nowMs = 0
  readonly ledger = new MemoryLedger()
  pool = new Pool(0, () => settings, { track: true, learn: false })
  readonly processes = new Map<Id, Process>(ids.map((id) => [id, new Process(id)]))
  /** Σ used per window index, every process (crashed ones included). */
  readonly usedByWindow = new Map<number, number>()
  /** Σ used per window the time of the spending falls in (what a central counter counts). */
  readonly usedByTime = new Map<number, number>()

  enqueue(batches: readonly LeaseBatch[]): void {
    this.ledger.write(this.pool.takeChanges((ms) => ms))
    for (const b of batches) {
      const p = this.processes.get(b.clientKey as Id)
      if (p !== undefined && p.connected) p.inFlight.push({ batch: b, sentMs: this.nowMs })
    }
  }

  report(p: Process): void {
    if (!p.connected || p.released) return
    const entry = {
      resource: R,
      wants: p.wants,
      ...(p.window === undefined ? {} : { used: p.used, window: p.window }),
    }
    this.enqueue(this.pool.reportDemand(p.id, [entry], this.nowMs).batches)
  }

  connect(p: Process): void {
    p.connected = true
    p.inFlight = []
    p.pendingAck = undefined
    this.pool.connect(p.id, p.id, undefined, `${p.id}-instance-${p.generation}`, this.nowMs)
    if (p.unreleased) this.enqueue(this.pool.release(p.id, [R], this.nowMs))
    p.unreleased = false
    this.report(p)
  }

  deliver(p: Process, ackLost: boolean): void {
    const next = p.inFlight.shift()
    if (next === undefined || !p.connected) return
    if (this.nowMs - next.sentMs > settings.graceMs) return // later than grace: lost
    for (const l of next.batch.leases) {
      p.advance(this.nowMs)
      const w = l.window
      // A lease of the window before, come after the next one's budget it carried was put in
      // force: nothing new (client/enforcer.ts).
      if (
        w !== undefined &&
        p.window !== undefined &&
        w.index < p.window &&
        w.next?.index === p.window
      )
        continue
      if (w !== undefined && w.index !== p.window) {
        p.window = w.index
        p.used = 0
      }
      if (w?.next !== undefined && w.next.index > w.index)
        p.next = {
          index: w.next.index,
          capacity: w.next.capacity,
          startAtMs: this.nowMs + w.next.startsInMs,
          endAtMs: this.nowMs + w.next.endsInMs,
        }
      else if (w !== undefined && p.next !== undefined && w.index >= p.next.index)
        p.next = undefined
      p.lease = { grant: l, receivedMs: this.nowMs }
      // In force when what was used fits it; else the ack waits (as for slots in flight).
      if (p.used > l.capacity) p.pendingAck = next.batch.seq
      else p.pendingAck = undefined
    }
    if (!ackLost && p.pendingAck === undefined)
      this.enqueue(this.pool.acknowledge(p.id, next.batch.seq, undefined, this.nowMs))
  }

  spend(p: Process, n: number): void {
    if (p.crashed && !p.connected && p.lease === undefined) return
    const k = Math.min(n, p.left(this.nowMs))
    if (k <= 0 || p.window === undefined) return
    p.used += k
    this.usedByWindow.set(p.window, (this.usedByWindow.get(p.window) ?? 0) + k)
    const byTime = Math.floor(this.nowMs / windowMs)
    this.usedByTime.set(byTime, (this.usedByTime.get(byTime) ?? 0) + k)
  }

  /** The leases sent again before the window's end, with the next window's blocks (edge-renewal.ts). */
  renewEdges(): void {
    this.enqueue(this.pool.renewEdges([R], this.nowMs))
  }

  round(): void {
    this.enqueue(this.pool.round(R, this.nowMs))
    this.enqueue(this.pool.grantWaiting(R, this.nowMs))
  }

  crashCoordinator(): void {
    for (const p of this.processes.values()) {
      p.connected = false
      p.inFlight = []
    }
    const restored = this.ledger.entries()
    this.pool = new Pool(this.nowMs, () => settings, { track: true, learn: false })
    this.pool.restore(restored, (ms) => ms, this.nowMs)
  }

  check(): void {
    for (const [w, used] of this.usedByWindow)
      expect(used, `window ${w} at ${this.nowMs} ms`).toBeLessThanOrEqual(capacity)
    for (const [w, used] of this.usedByTime)
      expect(used, `spent in window ${w}'s time, at ${this.nowMs} ms`).toBeLessThanOrEqual(capacity)
  }
}

type Step =
  | { op: 'join' | 'report' | 'disconnect' | 'crash' | 'release' | 'close'; p: Id }
  | { op: 'deliver'; p: Id; ackLost: boolean }
  | { op: 'want'; p: Id; wants: number }
  | { op: 'spend'; p: Id; n: number }
  | { op: 'round' | 'restart' | 'edge' }
  | { op: 'advance'; ms: number }
  /** Time moves to `ms` before the next window's edge (if that is ahead). */
  | { op: 'nearEdge'; ms: number }
  /** A refresh period of everyone: time, reports, a round, deliveries (acks lost at random), spending. */
  | { op: 'tick'; ms: number; lost: readonly boolean[]; spend: readonly number[] }

const step: fc.Arbitrary<Step> = fc.oneof(
  {
    weight: 2,
    arbitrary: fc.record({ op: fc.constantFrom('join', 'report'), p: fc.constantFrom(...ids) }),
  },
  {
    weight: 1,
    arbitrary: fc.record({
      op: fc.constantFrom('disconnect', 'crash', 'release', 'close'),
      p: fc.constantFrom(...ids),
    }),
  },
  {
    weight: 3,
    arbitrary: fc.record({
      op: fc.constant('deliver'),
      p: fc.constantFrom(...ids),
      ackLost: fc.boolean(),
    }),
  },
  {
    weight: 1,
    arbitrary: fc.record({
      op: fc.constant('want'),
      p: fc.constantFrom(...ids),
      wants: fc.constantFrom(0, 2, 10, 40, 200),
    }),
  },
  {
    weight: 3,
    arbitrary: fc.record({
      op: fc.constant('spend'),
      p: fc.constantFrom(...ids),
      n: fc.integer({ min: 1, max: 20 }),
    }),
  },
  { weight: 2, arbitrary: fc.record({ op: fc.constant('round') }) },
  { weight: 1, arbitrary: fc.record({ op: fc.constant('edge') }) },
  {
    weight: 1,
    arbitrary: fc.record({ op: fc.constant('nearEdge'), ms: fc.constantFrom(5, 60, 100, 150) }),
  },
  { weight: 1, arbitrary: fc.record({ op: fc.constant('restart') }) },
  {
    weight: 2,
    arbitrary: fc.record({ op: fc.constant('advance'), ms: fc.constantFrom(50, 300, 2000, 7000) }),
  },
  {
    weight: 8,
    arbitrary: fc.record({
      op: fc.constant('tick'),
      ms: fc.constantFrom(100, 200),
      lost: fc.tuple(fc.boolean(), fc.boolean(), fc.boolean()),
      spend: fc.tuple(
        fc.integer({ min: 0, max: 15 }),
        fc.integer({ min: 0, max: 15 }),
        fc.integer({ min: 0, max: 15 }),
      ),
    }),
  },
)

function run(steps: readonly Step[]): void {
  const w = new World()
  for (const s of steps) {
    const p = 'p' in s ? w.processes.get(s.p)! : undefined
    switch (s.op) {
      case 'join':
        if (!p!.connected && !p!.crashed) w.connect(p!)
        break
      case 'report':
        // Reporting takes a released quota up again.
        p!.released = false
        w.report(p!)
        break
      case 'disconnect':
        if (p!.connected) {
          p!.connected = false
          p!.inFlight = []
          w.pool.disconnect(p!.id, w.nowMs)
        }
        break
      case 'crash':
        // Gone: it may go on spending what it was given until its window time runs out, then
        // a new process comes under the same id with nothing used.
        if (p!.connected) w.pool.disconnect(p!.id, w.nowMs)
        p!.connected = false
        p!.inFlight = []
        p!.crashed = true
        break
      case 'close':
        // client.close(): the release says what was used of the window (the rest of the
        // block comes back), the connection closes, and a new process comes under the id.
        if (p!.connected) {
          const spent =
            p!.window === undefined ? [] : [{ resource: R, window: p!.window, used: p!.used }]
          w.enqueue(w.pool.release(p!.id, [R], w.nowMs, spent))
          w.pool.disconnect(p!.id, w.nowMs)
        }
        w.processes.set(p!.id, Object.assign(new Process(p!.id), { generation: p!.generation + 1 }))
        break
      case 'release':
        // The process gives the quota up (the resource released) and may take it up again.
        // A handle of the quota taken up again starts from what the released one used in its
        // window (client.ts), and a lease of the released one still on its way may be put in
        // force on it: the model's process goes on with its count and its deliveries.
        if (p!.connected) w.enqueue(w.pool.release(p!.id, [R], w.nowMs))
        else p!.unreleased = true
        p!.lease = undefined
        p!.pendingAck = undefined
        p!.released = true
        break
      case 'deliver':
        w.deliver(p!, s.ackLost)
        break
      case 'want':
        p!.wants = s.wants
        break
      case 'spend':
        w.spend(p!, s.n)
        break
      case 'round':
        w.round()
        break
      case 'restart':
        w.crashCoordinator()
        break
      case 'advance':
        w.nowMs += s.ms
        break
      case 'edge':
        w.renewEdges()
        break
      case 'nearEdge': {
        const at = (Math.floor(w.nowMs / windowMs) + 1) * windowMs - s.ms
        if (at > w.nowMs) w.nowMs = at
        break
      }
      case 'tick': {
        const edgeMs = (Math.floor(w.nowMs / windowMs) + 1) * windowMs
        w.nowMs += s.ms
        for (const q of w.processes.values()) w.report(q)
        w.round()
        // As the coordinator does, a window's leases go again 100 ms before its end.
        if (edgeMs - w.nowMs > 0 && edgeMs - w.nowMs <= 100) w.renewEdges()
        // Processes spend while what the round sent is on its way.
        for (const [i, q] of [...w.processes.values()].entries()) {
          w.spend(q, s.spend[i]!)
          w.check()
        }
        for (const [i, q] of [...w.processes.values()].entries())
          while (q.inFlight.length > 0) w.deliver(q, s.lost[i]! && q.inFlight.length === 1)
        break
      }
    }
    w.check()
  }
}

const tick = (
  spend: readonly number[],
  lost: readonly boolean[] = [false, false, false],
): Step => ({
  op: 'tick',
  ms: 100,
  lost,
  spend,
})

describe('quotas in the pool (model)', () => {
  it('counts a shrunk block in full until its client says what it used fits (a decrease races spending)', () => {
    run([
      { op: 'join', p: 'p' },
      { op: 'join', p: 'q' },
      { op: 'want', p: 'p', wants: 40 },
      tick([0, 0, 0]),
      // p stops asking: its block is cut back to what it reported used (0) while it spends 10,
      // and it dies before it can report them.
      { op: 'want', p: 'p', wants: 0 },
      tick([10, 0, 0]),
      { op: 'crash', p: 'p' },
      // q asks for all of it and spends all it gets.
      { op: 'want', p: 'q', wants: 500 },
      ...Array.from({ length: 10 }, () => tick([0, 15, 0])),
    ])
  })

  it('keeps what a released block used counted until the window ends (a process that closes, or takes the quota up again)', () => {
    run([
      { op: 'join', p: 'p' },
      { op: 'join', p: 'q' },
      { op: 'want', p: 'p', wants: 40 },
      tick([0, 0, 0]),
      tick([15, 0, 0]),
      tick([15, 0, 0]),
      // Spent and released before any report says so.
      { op: 'spend', p: 'p', n: 15 },
      { op: 'release', p: 'p' },
      { op: 'want', p: 'q', wants: 500 },
      ...Array.from({ length: 10 }, () => tick([0, 15, 0])),
      // p takes the quota up again in the same window, with nothing used as far as it knows.
      { op: 'report', p: 'p' },
      ...Array.from({ length: 10 }, () => tick([15, 15, 0])),
    ])
  })

  it('never lets the processes use more than the budget in a window, through crashes, restarts, lost acks and window ends', () => {
    fc.assert(
      fc.property(fc.array(step, { minLength: 1, maxLength: 200, size: 'max' }), (steps) =>
        run([
          { op: 'join', p: 'p' },
          { op: 'join', p: 'q' },
          { op: 'want', p: 'p', wants: 40 },
          { op: 'want', p: 'q', wants: 10 },
          { op: 'round' },
          ...steps,
        ]),
      ),
      { numRuns: fc.readConfigureGlobal().numRuns ?? 100 },
    )
  })
})
