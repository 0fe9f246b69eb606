import fc from 'fast-check'
import { describe, expect, it } from 'vitest'
import { Pool, type LeaseBatch } from '../../../server/pool/index.js'
import type { LeaseGrant } from '../../../shared/index.js'
import { resourceSettings } from '../../helpers/settings.js'

/**
 * The races between acks, rounds and reconnects, ordered by fast-check's
 * scheduler (`fc.scheduler`) rather than by a list of steps: every message
 * on every connection, every round and every reconnect is a task, and the
 * scheduler picks which runs next, so an ack may land after a newer round,
 * a batch after the reconnect that voided it, a report between a decrease
 * and its ack. Each connection stays in order (a WebSocket is), and a batch
 * sent on a closed connection is lost. One-way delays stay below `graceMs`
 * (the protocol's stated assumption, docs/protocol.md): time moves on only
 * once every batch older than that has arrived. The check after every task:
 * what the processes may enforce together never exceeds the capacity.
 */

const capacity = 90
const settings = resourceSettings({ id: 'api', capacity, burst: capacity, safeHoldMs: 300 })
const graceMs = settings.graceMs
const ids = ['a', 'b', 'c'] as const
type Id = (typeof ids)[number]

interface InForce {
  readonly lease: LeaseGrant
  readonly receivedMs: number
}

/** What a lease lets a process use at `nowMs` (client/resource.ts's rule, safe mode). */
function limitOf(f: InForce | undefined, nowMs: number): number {
  if (f === undefined) return 0
  const endMs = f.receivedMs + f.lease.ttlMs
  if (nowMs < endMs) return f.lease.capacity
  if (nowMs < endMs + f.lease.safeHoldMs) return Math.min(f.lease.safeCapacity, f.lease.capacity)
  return 0
}

class Process {
  /** The connection's number: a batch of an earlier one is lost with it. */
  connection = 0
  connected = false
  lease: InForce | undefined
  /** Messages on their way, each direction in order: batches down, acks and reports up. */
  readonly down: { batch: LeaseBatch; connection: number; sentMs: number }[] = []
  readonly up: { send: () => void; connection: number }[] = []
  constructor(readonly id: Id) {}
}

class World {
  nowMs = 0
  readonly pool = new Pool(0, (id) => (id === 'api' ? settings : undefined), { learn: false })
  readonly processes = new Map<Id, Process>(ids.map((id) => [id, new Process(id)]))

  out(batches: readonly LeaseBatch[]): void {
    for (const batch of batches) {
      const p = this.processes.get(batch.clientKey as Id)!
      if (p.connected) p.down.push({ batch, connection: p.connection, sentMs: this.nowMs })
    }
  }

  connect(p: Process, wants: number): void {
    if (p.connected) this.pool.disconnect(p.id, this.nowMs)
    p.connection++
    p.connected = true
    p.down.length = 0
    p.up.length = 0
    this.pool.connect(p.id, p.id, undefined, `${p.id}-instance`, this.nowMs)
    this.report(p, wants)
  }

  report(p: Process, wants: number): void {
    if (!p.connected) return
    const connection = p.connection
    p.up.push({
      connection,
      send: () =>
        this.out(this.pool.reportDemand(p.id, [{ resource: 'api', wants }], this.nowMs).batches),
    })
  }

  /** The next batch on its way down arrives: in force at once (rate), its ack goes up. */
  deliverDown(p: Process): void {
    const next = p.down.shift()
    if (next === undefined || next.connection !== p.connection || !p.connected) return
    for (const l of next.batch.leases) p.lease = { lease: l, receivedMs: this.nowMs }
    const { seq } = next.batch
    p.up.push({
      connection: p.connection,
      send: () => this.out(this.pool.acknowledge(p.id, seq, undefined, this.nowMs)),
    })
  }

  /** The next message on its way up reaches the pool (if its connection is still the one). */
  deliverUp(p: Process): void {
    const next = p.up.shift()
    if (next === undefined || next.connection !== p.connection || !p.connected) return
    next.send()
  }

  /**
   * The clock moves on by `ms`; every batch that would by then have been on its way longer
   * than `graceMs` arrives first, in order (later ones on its connection wait behind it).
   */
  advance(ms: number): void {
    for (const p of this.processes.values())
      while (p.down.length > 0 && this.nowMs + ms - p.down[0]!.sentMs >= graceMs) {
        this.deliverDown(p)
        this.check()
      }
    this.nowMs += ms
  }

  check(): void {
    let sum = 0
    for (const p of this.processes.values()) sum += limitOf(p.lease, this.nowMs)
    expect(sum, `at ${this.nowMs} ms`).toBeLessThanOrEqual(capacity * (1 + 1e-9))
  }
}

type Task =
  | { op: 'down' | 'up'; p: Id }
  | { op: 'report'; p: Id; wants: number }
  | { op: 'reconnect'; p: Id; wants: number }
  | { op: 'drop'; p: Id }
  | { op: 'round' }
  | { op: 'time'; ms: number }

const task: fc.Arbitrary<Task> = fc.oneof(
  {
    weight: 6,
    arbitrary: fc.record({ op: fc.constantFrom('down', 'up'), p: fc.constantFrom(...ids) }),
  },
  {
    weight: 2,
    arbitrary: fc.record({
      op: fc.constant('report'),
      p: fc.constantFrom(...ids),
      wants: fc.constantFrom(0, 10, 45, 90, 200),
    }),
  },
  {
    weight: 1,
    arbitrary: fc.record({
      op: fc.constant('reconnect'),
      p: fc.constantFrom(...ids),
      wants: fc.constantFrom(10, 90),
    }),
  },
  { weight: 1, arbitrary: fc.record({ op: fc.constant('drop'), p: fc.constantFrom(...ids) }) },
  { weight: 2, arbitrary: fc.record({ op: fc.constant('round') }) },
  {
    weight: 2,
    arbitrary: fc.record({ op: fc.constant('time'), ms: fc.constantFrom(10, 100, 400) }),
  },
)

function apply(w: World, t: Task): void {
  const p = 'p' in t ? w.processes.get(t.p)! : undefined
  switch (t.op) {
    case 'down':
      w.deliverDown(p!)
      break
    case 'up':
      w.deliverUp(p!)
      break
    case 'report':
      w.report(p!, t.wants)
      break
    case 'reconnect':
      w.connect(p!, t.wants)
      break
    case 'drop':
      // The connection is gone; what the process holds runs out on its own clock.
      if (p!.connected) {
        p!.connected = false
        w.pool.disconnect(p!.id, w.nowMs)
      }
      break
    case 'round':
      w.out(w.pool.round('api', w.nowMs))
      w.out(w.pool.grantWaiting('api', w.nowMs))
      break
    case 'time':
      w.advance(t.ms)
      break
  }
  w.check()
}

describe('acks, rounds and reconnects in any order (fc.scheduler)', () => {
  it('never lets the processes together enforce more than the capacity', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.scheduler(),
        fc.array(task, { minLength: 5, maxLength: 80 }),
        async (s, tasks) => {
          const w = new World()
          for (const p of w.processes.values()) w.connect(p, 60)
          // Every task is scheduled at once: the scheduler decides the order they run in.
          const runs = tasks.map((t) =>
            s.schedule(Promise.resolve(t), t.op).then((x) => apply(w, x)),
          )
          await s.waitAll()
          await Promise.all(runs)
          // Then everything on its way arrives, in order, and the pool settles within capacity.
          for (let i = 0; i < 20; i++) {
            for (const p of w.processes.values()) {
              w.deliverUp(p)
              w.deliverDown(p)
            }
            apply(w, { op: 'round' })
          }
        },
      ),
      { numRuns: fc.readConfigureGlobal().numRuns ?? 100 },
    )
  })
})
