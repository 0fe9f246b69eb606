import fc from 'fast-check'
import { describe, expect, it } from 'vitest'
import { allocate } from '../../../server/allocation/index.js'
import type { ResourceSettings } from '../../../server/config/index.js'
import { Pool, type LeaseBatch } from '../../../server/pool/index.js'
import { resourceSettings } from '../../helpers/settings.js'

/**
 * Model-based test of the pool: random joins, leaves, disconnects, demand
 * changes, acks, lost messages, clock steps and capacity changes, against
 * a simulated network of clients and a naive ledger of every lease sent.
 */

const R = 'r'
const ids = ['a', 'b', 'c', 'd'] as const
type Id = (typeof ids)[number]

interface InFlight {
  batch: LeaseBatch
  sentMs: number
}

interface SimClient {
  connected: boolean
  joined: boolean
  wants: number
  inFlight: InFlight[]
  /** The lease the process enforces: the newest it received, until ttl after receipt. */
  inForce: { capacity: number; expiresMs: number } | undefined
}

interface SentLease {
  clientId: string
  seq: number
  capacity: number
  sentMs: number
}

class World {
  nowMs = 0
  settings: ResourceSettings
  readonly pool: Pool
  readonly clients = new Map<Id, SimClient>()
  readonly ledger: SentLease[] = []
  readonly acked = new Map<string, number>()
  /** Σ committed may not exceed this: the capacity, or after a cut the old one until the excess drains. */
  bound: number

  constructor(capacity: number) {
    this.settings = resourceSettings({ capacity, burst: capacity })
    this.bound = capacity
    this.pool = new Pool(0, this.settingsFor)
    for (const id of ids)
      this.clients.set(id, {
        connected: false,
        joined: false,
        wants: 0,
        inFlight: [],
        inForce: undefined,
      })
  }

  settingsFor = (id: string): ResourceSettings | undefined => (id === R ? this.settings : undefined)

  enqueue(batches: LeaseBatch[]): void {
    for (const batch of batches) {
      for (const l of batch.leases) {
        expect(Number.isFinite(l.capacity) && l.capacity >= 0).toBe(true)
        this.ledger.push({
          clientId: batch.clientId,
          seq: batch.seq,
          capacity: l.capacity,
          sentMs: this.nowMs,
        })
      }
      const c = this.clients.get(batch.clientId as Id)!
      if (c.connected) c.inFlight.push({ batch, sentMs: this.nowMs })
    }
  }

  deliver(id: Id, ack: boolean): void {
    const c = this.clients.get(id)!
    const next = c.inFlight.shift()
    if (next === undefined || !c.connected) return
    for (const l of next.batch.leases)
      c.inForce = { capacity: l.capacity, expiresMs: this.nowMs + l.ttlMs }
    if (ack) this.enqueue(this.pool.acknowledge(id, next.batch.seq, this.nowMs))
    if (ack) this.acked.set(id, Math.max(this.acked.get(id) ?? 0, next.batch.seq))
  }

  advance(ms: number): void {
    this.nowMs += ms
    for (const c of this.clients.values()) {
      // A message delayed beyond graceMs is treated as lost: the design's safety holds for delays below grace.
      c.inFlight = c.inFlight.filter((m) => this.nowMs - m.sentMs < this.settings.graceMs)
      if (c.inForce !== undefined && c.inForce.expiresMs <= this.nowMs) c.inForce = undefined
    }
  }

  /** Naive Σ committed: per client, the max over leases neither lapsed nor replaced by an acked newer one. */
  naiveCommitted(): number {
    const hold = this.settings.leaseTtlMs + this.settings.graceMs
    let total = 0
    for (const id of ids) {
      const mine = this.ledger.filter((l) => l.clientId === id && l.sentMs + hold > this.nowMs)
      const acked = this.acked.get(id) ?? 0
      const newestAcked = Math.max(-1, ...mine.filter((l) => l.seq <= acked).map((l) => l.seq))
      const counted = mine.filter((l) => l.seq >= newestAcked)
      total += Math.max(0, ...counted.map((l) => l.capacity))
    }
    return total
  }

  check(): void {
    const eps = 1e-9 * Math.max(1, this.bound) * 10
    const committed = this.pool.committed(R, this.nowMs)
    if (committed <= this.settings.capacity + eps) this.bound = this.settings.capacity
    expect(committed).toBeLessThanOrEqual(this.bound + eps)
    expect(committed).toBeCloseTo(this.naiveCommitted(), 6)
    let inForce = 0
    for (const c of this.clients.values()) inForce += c.inForce?.capacity ?? 0
    expect(inForce).toBeLessThanOrEqual(this.bound + eps)
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
const wants = fc.oneof(
  fc.constant(0),
  fc.integer({ min: 1, max: 200 }),
  fc.double({ min: 0, max: 500, noNaN: true }),
)

const baseCommands = [
  fc.tuple(id, wants).map(([i, w]) =>
    cmd(`join(${i}, ${w})`, (world) => {
      const c = world.clients.get(i)!
      c.connected = c.joined = true
      c.wants = w
      world.pool.connect(i, undefined)
      world.enqueue(world.pool.reportDemand(i, [{ resource: R, wants: w }], world.nowMs).batches)
    }),
  ),
  fc.tuple(id, wants).map(([i, w]) =>
    cmd(
      `report(${i}, ${w})`,
      (world) => {
        world.clients.get(i)!.wants = w
        world.enqueue(world.pool.reportDemand(i, [{ resource: R, wants: w }], world.nowMs).batches)
      },
      (world) => world.clients.get(i)!.connected,
    ),
  ),
  fc.constant(cmd('round', (world) => world.enqueue(world.pool.round(R, world.nowMs)))),
  fc
    .tuple(id, fc.boolean())
    .map(([i, ack]) => cmd(`deliver(${i}, ack=${ack})`, (world) => world.deliver(i, ack))),
  id.map((i) => cmd(`lose(${i})`, (world) => void world.clients.get(i)!.inFlight.shift())),
  id.map((i) =>
    cmd(
      `disconnect(${i})`,
      (world) => {
        const c = world.clients.get(i)!
        c.connected = false
        c.inFlight = []
        world.pool.disconnect(i)
      },
      (world) => world.clients.get(i)!.connected,
    ),
  ),
  id.map((i) =>
    cmd(
      `leave(${i})`,
      (world) => {
        const c = world.clients.get(i)!
        c.inForce = undefined // the process stops using the resource before it says so
        c.inFlight = []
        world.enqueue(world.pool.release(i, [R], world.nowMs))
        world.ledger.splice(0, world.ledger.length, ...world.ledger.filter((l) => l.clientId !== i))
        world.pool.disconnect(i)
        c.connected = false
      },
      (world) => world.clients.get(i)!.connected,
    ),
  ),
  fc.integer({ min: 1, max: 700 }).map((ms) => cmd(`advance(${ms})`, (world) => world.advance(ms))),
  fc.integer({ min: 0, max: 300 }).map((capacity) =>
    cmd(`capacity(${capacity})`, (world) => {
      world.bound = Math.max(world.bound, capacity)
      world.settings = { ...world.settings, capacity, burst: capacity }
      world.pool.refreshSettings(R)
    }),
  ),
]

// Joins, reports, rounds and deliveries drive the interesting interleavings: weight them up.
const [join, report, round, deliver, ...rest] = baseCommands
const commands = [
  join!,
  join!,
  report!,
  report!,
  round!,
  round!,
  round!,
  deliver!,
  deliver!,
  deliver!,
  deliver!,
  ...rest,
]

/** Lets messages flow: every connected client reports, rounds run, every batch is delivered and acked. */
function heal(world: World): void {
  const hold = world.settings.leaseTtlMs + world.settings.graceMs
  for (let t = 0; t <= hold + 2 * world.settings.refreshMs; t += world.settings.refreshMs) {
    for (const [i, c] of world.clients) {
      if (c.connected)
        world.enqueue(
          world.pool.reportDemand(i, [{ resource: R, wants: c.wants }], world.nowMs).batches,
        )
    }
    world.enqueue(world.pool.round(R, world.nowMs))
    for (let pass = 0; pass < 10; pass++)
      for (const i of ids) while (world.clients.get(i)!.inFlight.length > 0) world.deliver(i, true)
    world.check()
    world.advance(world.settings.refreshMs)
  }
}

describe('pool (model-based)', () => {
  it('keeps Σ committed and Σ in force within capacity under any interleaving, then converges to the allocation', () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 0, max: 300 }),
        fc.commands(commands, { maxCommands: 120, size: 'large' }),
        (capacity, cmds) => {
          const world = new World(capacity)
          fc.modelRun(() => ({ model: {}, real: world }), cmds)
          heal(world)
          const connected = ids.filter((i) => world.clients.get(i)!.connected)
          const expected = allocate({
            capacity: world.settings.capacity,
            surplus: 'hold',
            clients: connected.map((i) => ({ id: i, wants: world.clients.get(i)!.wants })),
          })
          connected.forEach((i, k) => {
            const inForce = world.clients.get(i)!.inForce?.capacity ?? 0
            expect(inForce).toBeCloseTo(expected.grants[k]!, 6)
          })
        },
      ),
      { numRuns: Math.max(50, Math.floor(fc.readConfigureGlobal().numRuns! / 2)) },
    )
  })
})
