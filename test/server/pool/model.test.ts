import fc from 'fast-check'
import { describe, expect, it } from 'vitest'
import { allocate } from '../../../server/allocation/index.js'
import type { ResourceSettings } from '../../../server/config/index.js'
import { MemoryLedger } from '../../../server/ledger/index.js'
import { Pool, type LeaseBatch } from '../../../server/pool/index.js'
import type { LeaseGrant } from '../../../shared/index.js'
import { resourceSettings } from '../../helpers/settings.js'

/**
 * Model-based test of the pool against simulated client processes: random
 * joins, reports, rounds, deliveries (with acks held back, lost or sent
 * late), lost batches, disconnects and reconnects of the same process,
 * another process taking a client id over, slots taken and given back,
 * clock steps and capacity cuts, over two resources (rate and concurrency)
 * that every client uses at once.
 *
 * The check after every step is the promise itself, measured on the
 * processes, not on the pool's books: what the processes may enforce (rate:
 * the lease in force, or its safe fallback while the hold lasts; concurrency:
 * the larger of that and the slots in flight) never exceeds what the pool
 * counts as committed, and that never exceeds the capacity (after a cut, the
 * old one until the excess drains).
 *
 * The model's assumptions are the protocol's: a message delayed beyond
 * graceMs is lost, and work holding a slot ends within graceMs of the lease
 * it was taken under ending.
 */

const RATE = 'rate-r'
const SLOTS = 'slot-r'
const resources = [RATE, SLOTS] as const
type Rid = (typeof resources)[number]
const ids = ['a', 'b', 'c', 'd'] as const
type Id = (typeof ids)[number]

interface InForce {
  readonly lease: LeaseGrant
  readonly receivedMs: number
}

/** One client process, as the model runs it. */
class Process {
  readonly id: Id
  readonly instance: string
  connected = false
  /** An orphan lost its id to another process and never heard of it: it runs on what it has. */
  orphan = false
  /** Batches on the way to this process on its current connection. */
  inFlight: { batch: LeaseBatch; sentMs: number }[] = []
  readonly inForce = new Map<Rid, InForce>()
  /** Concurrency: slots taken and not yet given back. */
  slots = 0
  /** When the slot limit last dropped below the slots in flight. */
  overSinceMs: number | undefined
  /** Concurrency acks held back until the slots fit: seq of the batch. */
  pendingAck: number | undefined
  /** Batches lost with an earlier connection, never received. */
  lostWithConnection: number[] = []
  wants: Record<Rid, number> = { [RATE]: 0, [SLOTS]: 0 }

  constructor(id: Id, generation: number) {
    this.id = id
    this.instance = `${id}-instance-${generation}`
  }

  /** When the slot limit fell below `slots` by the clock (the lease's end, or its fallback's). */
  dropMs(slots: number): number {
    const f = this.inForce.get(SLOTS)
    if (f === undefined) return -Infinity
    const endMs = f.receivedMs + f.lease.ttlMs
    const fallback = Math.floor(Math.min(f.lease.safeCapacity, f.lease.capacity) + 1e-9)
    return slots > fallback ? endMs : endMs + f.lease.safeHoldMs
  }

  /** What this process may enforce of `r` at `nowMs`. */
  limit(r: Rid, nowMs: number): number {
    const f = this.inForce.get(r)
    if (f === undefined) return 0
    const endMs = f.receivedMs + f.lease.ttlMs
    if (nowMs < endMs) return f.lease.capacity
    if (nowMs < endMs + f.lease.safeHoldMs) return Math.min(f.lease.safeCapacity, f.lease.capacity)
    return 0
  }
}

class World {
  nowMs = 0
  readonly settings = new Map<Rid, ResourceSettings>()
  pool: Pool
  /** What the pool wrote down before each batch left it: a crash restarts from this. */
  readonly ledger = new MemoryLedger()
  crashes = 0
  processes = new Map<Id, Process>()
  /** Processes that lost their id and still enforce what they hold. */
  orphans: Process[] = []
  generation = 0
  /** Σ committed may not exceed this: the capacity, or after a cut the old one until the excess drains. */
  readonly bound = new Map<Rid, number>()

  /** `spread`: the rate resource spreads its surplus, keeping leases within `headroomTolerance`. */
  constructor(rateCapacity: number, slotCapacity: number, spread?: { headroomTolerance: number }) {
    this.settings.set(
      RATE,
      resourceSettings({
        id: RATE,
        capacity: rateCapacity,
        burst: rateCapacity,
        ...(spread === undefined ? {} : { surplus: 'spread', ...spread }),
      }),
    )
    this.settings.set(
      SLOTS,
      resourceSettings({
        id: SLOTS,
        kind: 'concurrency',
        capacity: slotCapacity,
        burst: slotCapacity,
      }),
    )
    this.bound.set(RATE, rateCapacity)
    this.bound.set(SLOTS, slotCapacity)
    this.pool = new Pool(0, this.settingsFor, { track: true })
    for (const id of ids) this.processes.set(id, new Process(id, this.generation++))
  }

  readonly settingsFor = (id: string): ResourceSettings | undefined => this.settings.get(id as Rid)

  get graceMs(): number {
    return this.settings.get(RATE)!.graceMs
  }

  enqueue(batches: readonly LeaseBatch[]): void {
    // Write-ahead: what the batches commit is in the ledger before any of them can be delivered.
    this.ledger.write(this.pool.takeChanges((ms) => ms))
    for (const batch of batches) {
      for (const l of batch.leases) {
        expect(Number.isFinite(l.capacity) && l.capacity >= 0).toBe(true)
        expect(l.safeCapacity).toBeLessThanOrEqual(l.capacity)
      }
      const p = this.processes.get(batch.clientKey as Id)
      if (p !== undefined && p.connected) p.inFlight.push({ batch, sentMs: this.nowMs })
    }
  }

  report(p: Process): void {
    this.enqueue(
      this.pool.reportDemand(
        p.id,
        resources.map((r) => ({ resource: r, wants: p.wants[r] })),
        this.nowMs,
      ).batches,
    )
  }

  connect(p: Process): void {
    p.connected = true
    p.inFlight = []
    p.pendingAck = undefined
    this.pool.connect(p.id, p.id, undefined, p.instance, this.nowMs)
    this.report(p)
  }

  /** The process applies the next batch; acks what is in force (unless the ack is lost). */
  deliver(p: Process, ackLost: boolean): void {
    const next = p.inFlight.shift()
    if (next === undefined || !p.connected) return
    const ready: string[] = []
    for (const l of next.batch.leases) {
      const r = l.resource as Rid
      const before = p.limit(r, this.nowMs)
      p.inForce.set(r, { lease: l, receivedMs: this.nowMs })
      if (r === SLOTS && p.slots > l.capacity) {
        if (before >= p.slots) p.overSinceMs = this.nowMs
        p.pendingAck = next.batch.seq
      } else {
        if (r === SLOTS) p.pendingAck = undefined
        ready.push(r)
      }
    }
    if (ackLost || ready.length === 0) return
    const all = ready.length === next.batch.leases.length
    this.enqueue(this.pool.acknowledge(p.id, next.batch.seq, all ? undefined : ready, this.nowMs))
  }

  /** Slots come back; a held-back ack goes once they fit. */
  finish(p: Process, n: number): void {
    p.slots = Math.max(0, p.slots - n)
    if (p.pendingAck !== undefined && p.connected && p.slots <= p.limit(SLOTS, this.nowMs)) {
      this.enqueue(this.pool.acknowledge(p.id, p.pendingAck, [SLOTS], this.nowMs))
      p.pendingAck = undefined
    }
  }

  use(p: Process): void {
    const limit = Math.floor(p.limit(SLOTS, this.nowMs) + 1e-9)
    if (p.slots < limit) p.slots = Math.min(limit, Math.max(p.slots, Math.round(p.wants[SLOTS])))
  }

  disconnect(p: Process): void {
    p.connected = false
    p.lostWithConnection.push(...p.inFlight.map((m) => m.batch.seq))
    p.inFlight = []
    p.pendingAck = undefined
    this.pool.disconnect(p.id, this.nowMs)
  }

  /**
   * The coordinator dies and a new one starts from the ledger: every connection drops (batches
   * on the way are lost), every process goes on enforcing what it has.
   */
  crash(): void {
    this.crashes++
    for (const p of [...this.processes.values(), ...this.orphans]) {
      p.connected = false
      p.inFlight = []
      p.pendingAck = undefined
      // Sequence numbers are the old coordinator's: they mean nothing to the new one.
      p.lostWithConnection = []
    }
    const entries = this.ledger.entries()
    this.pool = new Pool(this.nowMs, this.settingsFor, { learn: false, track: true })
    this.pool.restore(entries, (ms) => ms, this.nowMs)
    // As the coordinator does (coordinator.ts, #restore): what the restore learned is written.
    this.ledger.write(this.pool.takeChanges((ms) => ms))
  }

  /** Another process takes `p`'s id; `p` never hears of it and runs on what it holds. */
  takeOver(p: Process): void {
    p.orphan = true
    p.connected = false
    p.inFlight = []
    this.orphans.push(p)
    const fresh = new Process(p.id, this.generation++)
    fresh.wants = { ...p.wants }
    this.processes.set(p.id, fresh)
    this.connect(fresh)
  }

  advance(ms: number): void {
    this.nowMs += ms
    for (const p of [...this.processes.values(), ...this.orphans]) {
      // A message delayed beyond graceMs counts as lost: the design's safety holds for delays below grace.
      p.inFlight = p.inFlight.filter((m) => this.nowMs - m.sentMs < this.graceMs)
      // Work holding a slot ends within graceMs of the lease it was taken under ending.
      const limit = Math.floor(p.limit(SLOTS, this.nowMs) + 1e-9)
      if (p.slots > limit) {
        p.overSinceMs ??= p.dropMs(p.slots)
        if (this.nowMs - p.overSinceMs >= this.graceMs) p.slots = limit
      } else p.overSinceMs = undefined
    }
  }

  check(): void {
    for (const r of resources) {
      const capacity = this.settings.get(r)!.capacity
      // A float tolerance scaled by the bound it is added to: the excess over a cut counts as
      // drained only within the tolerance of the new bound, the same one checked from then on.
      const eps = (bound: number) => 1e-8 * Math.max(1, bound)
      const committed = this.pool.committed(r, this.nowMs)
      if (committed <= capacity + eps(capacity)) this.bound.set(r, capacity)
      const bound = this.bound.get(r)!
      expect(committed, `${r}: Σ committed`).toBeLessThanOrEqual(bound + eps(bound))
      let enforced = 0
      for (const p of [...this.processes.values(), ...this.orphans]) {
        const limit = p.limit(r, this.nowMs)
        enforced += r === SLOTS ? Math.max(p.slots, Math.floor(limit + 1e-9)) : limit
      }
      expect(enforced, `${r}: Σ enforced against Σ committed`).toBeLessThanOrEqual(
        committed + eps(bound),
      )
    }
  }
}

type Cmd = fc.Command<object, World>

const cmd = (
  name: string,
  run: (w: World) => void,
  canRun: (w: World) => boolean = () => true,
): Cmd => ({
  check: (_m: object) => true,
  run: (_m: object, w: World) => {
    if (!canRun(w)) return
    run(w)
    w.check()
  },
  toString: () => name,
})

const id = fc.constantFrom(...ids)
const rid = fc.constantFrom(...resources)
const wants = fc.oneof(
  fc.constant(0),
  fc.integer({ min: 1, max: 40 }),
  fc.double({ min: 0, max: 120, noNaN: true }),
)
const connected = (i: Id) => (w: World) => w.processes.get(i)!.connected

const commands = [
  fc.tuple(id, wants, wants).map(([i, w1, w2]) =>
    cmd(
      `join(${i}, ${w1}, ${w2})`,
      (world) => {
        const p = world.processes.get(i)!
        p.wants = { [RATE]: w1, [SLOTS]: w2 }
        world.connect(p)
      },
      (world) => !world.processes.get(i)!.connected,
    ),
  ),
  fc.tuple(id, rid, wants).map(([i, r, w]) =>
    cmd(
      `report(${i}, ${r}, ${w})`,
      (world) => {
        const p = world.processes.get(i)!
        p.wants[r] = w
        world.report(p)
      },
      connected(i),
    ),
  ),
  rid.map((r) => cmd(`round(${r})`, (world) => world.enqueue(world.pool.round(r, world.nowMs)))),
  // What the coordinator does a debounce after acks left increases waiting: grant them in part.
  rid.map((r) =>
    cmd(`grantWaiting(${r})`, (world) => {
      world.pool.takeWaiting()
      world.enqueue(world.pool.grantWaiting(r, world.nowMs))
    }),
  ),
  fc
    .tuple(id, fc.boolean())
    .map(([i, lost]) =>
      cmd(`deliver(${i}, ackLost=${lost})`, (world) =>
        world.deliver(world.processes.get(i)!, lost),
      ),
    ),
  id.map((i) => cmd(`lose(${i})`, (world) => void world.processes.get(i)!.inFlight.shift())),
  id.map((i) => cmd(`use(${i})`, (world) => world.use(world.processes.get(i)!))),
  fc
    .tuple(id, fc.integer({ min: 1, max: 20 }))
    .map(([i, n]) =>
      cmd(`finish(${i}, ${n})`, (world) => world.finish(world.processes.get(i)!, n)),
    ),
  id.map((i) =>
    cmd(`disconnect(${i})`, (world) => world.disconnect(world.processes.get(i)!), connected(i)),
  ),
  id.map((i) =>
    cmd(
      `bounce(${i})`,
      (world) => {
        const p = world.processes.get(i)!
        world.disconnect(p)
        world.connect(p)
      },
      connected(i),
    ),
  ),
  // A client that acks a batch it lost with an earlier connection (what an ack covering
  // "everything up to seq" did): the pool must not let it free anything.
  id.map((i) =>
    cmd(
      `staleAck(${i})`,
      (world) => {
        const p = world.processes.get(i)!
        const seq = p.lostWithConnection.at(-1)
        if (seq !== undefined) world.enqueue(world.pool.acknowledge(i, seq, undefined, world.nowMs))
      },
      connected(i),
    ),
  ),
  id.map((i) =>
    cmd(`takeOver(${i})`, (world) => world.takeOver(world.processes.get(i)!), connected(i)),
  ),
  id.map((i) =>
    cmd(
      `leave(${i})`,
      (world) => {
        const p = world.processes.get(i)!
        // The process stops using the resources before it says so.
        p.inForce.clear()
        p.slots = 0
        p.inFlight = []
        world.enqueue(world.pool.release(i, [...resources], world.nowMs))
        world.disconnect(p)
      },
      connected(i),
    ),
  ),
  fc.integer({ min: 1, max: 700 }).map((ms) => cmd(`advance(${ms})`, (world) => world.advance(ms))),
  fc.constant(cmd('crash', (world) => world.crash())),
  fc.tuple(rid, fc.integer({ min: 0, max: 60 })).map(([r, capacity]) =>
    cmd(`capacity(${r}, ${capacity})`, (world) => {
      world.bound.set(r, Math.max(world.bound.get(r)!, capacity))
      world.settings.set(r, { ...world.settings.get(r)!, capacity, burst: capacity })
      world.pool.refreshSettings(r)
    }),
  ),
]

// Joins, reports, rounds, deliveries and reconnects drive the interesting interleavings: weight them up.
const [join, report, round, grantWaiting, deliver, , use, , , bounce, staleAck] = commands
const weighted = [
  ...commands,
  ...[
    join,
    join,
    report,
    report,
    round,
    round,
    grantWaiting,
    deliver,
    deliver,
    deliver,
    use,
    bounce,
    bounce,
    staleAck,
  ].map((c) => c!),
]

/** Lets messages flow: every connected process reports, rounds run, every batch is delivered and acked. */
function heal(world: World): void {
  const s = world.settings.get(RATE)!
  const lifeMs = s.leaseTtlMs + s.graceMs + s.safeHoldMs
  for (let t = 0; t <= lifeMs + 3 * s.refreshMs; t += s.refreshMs) {
    for (const p of world.processes.values()) {
      if (!p.connected) continue
      world.report(p)
      world.finish(p, Infinity)
    }
    for (const r of resources) world.enqueue(world.pool.round(r, world.nowMs))
    for (let pass = 0; pass < 10; pass++)
      for (const p of world.processes.values())
        while (p.inFlight.length > 0) world.deliver(p, false)
    world.check()
    world.advance(s.refreshMs)
  }
}

describe('pool (model-based)', () => {
  it('never lets what processes enforce exceed what the pool counts, nor that exceed capacity, under any interleaving; then converges to the allocation', () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 0, max: 300 }),
        fc.integer({ min: 0, max: 40 }),
        fc.commands(weighted, { maxCommands: 150, size: 'large' }),
        (rateCapacity, slotCapacity, cmds) => {
          const world = new World(rateCapacity, slotCapacity)
          fc.modelRun(() => ({ model: {}, real: world }), cmds)
          heal(world)
          const live = ids.filter((i) => world.processes.get(i)!.connected)
          const expected = allocate({
            capacity: world.settings.get(RATE)!.capacity,
            surplus: 'hold',
            clients: live.map((i) => ({ id: i, wants: world.processes.get(i)!.wants[RATE] })),
          })
          live.forEach((i, k) => {
            const p = world.processes.get(i)!
            expect(p.limit(RATE, world.nowMs)).toBeCloseTo(expected.grants[k]!, 6)
          })
        },
      ),
      { numRuns: Math.max(50, Math.floor(fc.readConfigureGlobal().numRuns! / 2)) },
    )
  })

  it('with surplus spread and a headroom tolerance: the same bounds under any interleaving; then every lease covers its max-min share and stays within the tolerance of its spread target', () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 0, max: 300 }),
        fc.integer({ min: 0, max: 40 }),
        fc.double({ min: 0, max: 0.5, noNaN: true }),
        fc.commands(weighted, { maxCommands: 150, size: 'large' }),
        (rateCapacity, slotCapacity, headroomTolerance, cmds) => {
          const world = new World(rateCapacity, slotCapacity, { headroomTolerance })
          fc.modelRun(() => ({ model: {}, real: world }), cmds)
          heal(world)
          const live = ids.filter((i) => world.processes.get(i)!.connected)
          const capacity = world.settings.get(RATE)!.capacity
          const problem = (surplus: 'hold' | 'spread') =>
            allocate({
              capacity,
              surplus,
              clients: live.map((i) => ({ id: i, wants: world.processes.get(i)!.wants[RATE] })),
            }).grants
          const fair = problem('hold')
          const spread = problem('spread')
          live.forEach((i, k) => {
            const limit = world.processes.get(i)!.limit(RATE, world.nowMs)
            expect(limit).toBeGreaterThanOrEqual(fair[k]! - 1e-6)
            expect(Math.abs(limit - spread[k]!)).toBeLessThanOrEqual(
              headroomTolerance * spread[k]! + 1e-6,
            )
          })
        },
      ),
      { numRuns: Math.max(50, Math.floor(fc.readConfigureGlobal().numRuns! / 2)) },
    )
  })
})

/**
 * A world for a counterexample replayed step by step: each step checked as the property checks
 * it; the slot capacity set (its bound kept until the excess drains); a process joining.
 */
function replay() {
  const w = new World(0, 0, { headroomTolerance: 0 })
  const step = (run: () => void) => {
    run()
    w.check()
  }
  const P = (i: Id) => w.processes.get(i)!
  const capacity = (c: number) => {
    w.bound.set(SLOTS, Math.max(w.bound.get(SLOTS)!, c))
    w.settings.set(SLOTS, { ...w.settings.get(SLOTS)!, capacity: c, burst: c })
    w.pool.refreshSettings(SLOTS)
  }
  const join = (i: Id, rate: number, slots: number) => {
    P(i).wants = { [RATE]: rate, [SLOTS]: slots }
    w.connect(P(i))
  }
  return { w, step, P, capacity, join }
}

describe('pool (model) regressions', () => {
  // CI, seed -727381748: a concurrency lease restored from the ledger lapsed while its process was
  // away; the process came back and went away again, and the disconnect extended the lapsed lease,
  // counting 2 committed of a capacity cut to 1.
  it('a lease that lapsed while its process was away does not count again when it goes away once more', () => {
    const { w, step, P, capacity, join } = replay()
    step(() => capacity(2))
    step(() => join('d', 0, 2))
    step(() => w.enqueue(w.pool.round(SLOTS, w.nowMs)))
    step(() => join('a', 1, 1))
    step(() => (w.disconnect(P('d')), w.connect(P('d'))))
    step(() => w.crash())
    for (const ms of [576, 324, 653]) step(() => w.advance(ms))
    step(() => join('d', 1, 0))
    step(() => w.advance(147))
    step(() => capacity(1))
    step(() => w.disconnect(P('d')))
    expect(w.pool.committed(SLOTS, w.nowMs)).toBeLessThanOrEqual(1)
  })

  // CI, seed -378534295: a concurrency lease the ledger had pinned (its process connected) was
  // restored after a crash, lapsed a lease life later, and a second crash before anything was
  // written restored it pinned again, counting 1 committed of a capacity cut to 0. The restore's
  // state is written at once now (coordinator.ts, #restore; World.crash does the same).
  it('a pinned lease restored after a crash lapses once: a second crash does not count it again', () => {
    const { w, step, capacity, join } = replay()
    step(() => capacity(1))
    step(() => join('a', 0, 1))
    step(() => w.enqueue(w.pool.round(SLOTS, w.nowMs)))
    step(() => capacity(0))
    step(() => w.crash())
    for (const ms of [375, 444, 661, 220]) step(() => w.advance(ms))
    expect(w.pool.committed(SLOTS, w.nowMs)).toBe(0)
    step(() => w.crash())
    expect(w.pool.committed(SLOTS, w.nowMs)).toBe(0)
  })

  // CI, seed 1975823762: a slot lease lapsed when its process came back after a crash (it had
  // ended while the process was away), the ledger kept it as a lease of its fallback, and a second
  // crash restored it as not lapsed: the restore held it anew for the process that was away
  // (entry.ts, `disconnected`), 1 committed of a capacity cut to 0. The ledger says `lapsed` now.
  it('a slot that lapsed at a reconnect is restored lapsed: a second crash does not hold it anew', () => {
    const { w, step, P, capacity, join } = replay()
    const b = P('b')
    step(() => capacity(1))
    step(() => join('b', 1, 1))
    step(() => w.enqueue(w.pool.round(SLOTS, w.nowMs)))
    step(() => capacity(0))
    step(() => (w.disconnect(b), w.connect(b)))
    step(() => w.crash())
    for (const ms of [358, 509, 333]) step(() => w.advance(ms))
    step(() => join('b', 1, 0))
    expect(w.ledger.entries()[0]!.commitments[0]!.lapsed).toBe(true)
    step(() => w.advance(500))
    expect(w.pool.committed(SLOTS, w.nowMs)).toBe(0)
    step(() => w.crash())
    expect(w.pool.committed(SLOTS, w.nowMs)).toBe(0)
  })
})
