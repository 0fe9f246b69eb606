import fc from 'fast-check'
import { describe, expect, it } from 'vitest'
import { resolveKeyedOptions } from '../../../client/options.js'
import { KeyedFamily } from '../../../client/keyed/index.js'
import type { FamilySettings, ResourceSettings } from '../../../server/config/index.js'
import { MemoryLedger } from '../../../server/ledger/index.js'
import { Pool, centralClientId, type LeaseBatch } from '../../../server/pool/index.js'
import { ManualClock, keyOfId } from '../../../shared/index.js'
import { resourceSettings } from '../../helpers/settings.js'

/**
 * Model-based test of keyed families in the pool, against the client's own
 * `KeyedFamily` (client/keyed.ts), each process a real one on a manual
 * clock: a default share of every key from the family lease, a key's own
 * lease once it is hot, back to the default when the key goes cold. Random
 * joins, reports with moving demand per key, rounds of the family and of
 * each key, deliveries with acks lost or held, lost batches, disconnects,
 * reconnects and crashes (a process that never comes back, enforcing what
 * it holds until it lapses), and time.
 *
 * Three of the processes check through `decide` (they say so in their reports: remote
 * decisions) and one is the coordinator's own part (its client id), so with every process
 * joined the family is crowded and that part holds the deciding processes' default shares
 * (server/pool/shapes/default-holders.ts), and moves them back as processes come and go.
 *
 * The check after every step is the promise, key by key, measured on the
 * processes: Σ over processes of what each may enforce of a key never
 * exceeds the key's capacity.
 */

const FAMILY = 'k/*'
const keys = ['k/a', 'k/b', 'k/c'] as const
const ids = ['p', 'q', 'r', 's', 't', 'u', 'c'] as const
type Id = (typeof ids)[number]
const capacity = 12
/** The family's settings; `maxHotKeys` 1 keeps most keys on the default split, spent there. */
function familySettings(maxHotKeys: number): ReadonlyMap<string, ResourceSettings> {
  const family: FamilySettings = Object.freeze({
    role: 'family',
    prefix: 'k',
    familyId: FAMILY,
    keyKind: 'rate',
    keyCapacity: capacity,
    keyBurst: capacity,
    plan: {},
    maxHotKeys,
    maxDefaultHolders: 100,
  })
  return new Map<string, ResourceSettings>([
    [FAMILY, resourceSettings({ id: FAMILY, capacity: 1, burst: 1, family, safeHoldMs: 300 })],
    ...keys.map(
      (k) =>
        [
          k,
          resourceSettings({
            id: k,
            capacity,
            burst: capacity,
            family: { ...family, role: 'key' },
            safeHoldMs: 300,
          }),
        ] as const,
    ),
  ])
}
const manyHotKeys = familySettings(100)
const owner = { requestEarlyReport: () => undefined, drained: () => undefined }
/** Processes that check by `decide`: a remote ask is refused here (the model has no coordinator's part to answer). */
const deciders = new Set<Id>(['p', 'q', 'r'])
const deciding = {
  ...owner,
  askRemote: () => Promise.resolve({ admitted: false, retryAfterMs: 0 }),
}
/** The coordinator's own part of every key, as a client of the pool. */
const central: Id = 'c'

class Process {
  connected = false
  crashed = false
  /** Closed cleanly: its family admits nothing more, whatever its buckets hold. */
  closed = false
  inFlight: { batch: LeaseBatch; sentMs: number }[] = []
  wants: Record<string, number> = {}
  readonly family: KeyedFamily
  /** When this process last reported: its demand is asked for since. */
  lastReportMs = 0

  constructor(
    readonly id: Id,
    clock: ManualClock,
    /** Its hello's instance: a new process under the same id is another instance. */
    readonly instance = `${id}-instance`,
  ) {
    this.family = new KeyedFamily(
      'k',
      resolveKeyedOptions('k', {}),
      clock,
      clock,
      deciders.has(id) ? deciding : owner,
    )
  }

  /** What this process may enforce of `key` now: the client's own answer. */
  enforces(key: string): number {
    return this.family.leaseOf(keyOfId('k', key)!).capacity
  }
}

class World {
  readonly clock = new ManualClock(0, 0)
  pool: Pool
  /** What the pool wrote down before each batch left it: a coordinator restart starts from this. */
  readonly ledger = new MemoryLedger()
  readonly #settings: ReadonlyMap<string, ResourceSettings>

  /** Keys leased on their own at most (the coordinator's admission refuses more: they stay on the default split). */
  readonly maxHotKeys: number

  constructor(settings: ReadonlyMap<string, ResourceSettings> = manyHotKeys) {
    this.#settings = settings
    this.pool = new Pool(0, (id) => settings.get(id), { track: true })
    this.maxHotKeys = settings.get(FAMILY)?.family?.maxHotKeys ?? Infinity
  }
  readonly processes = new Map<Id, Process>(ids.map((id) => [id, new Process(id, this.clock)]))

  get nowMs(): number {
    return this.clock.now()
  }

  enqueue(batches: readonly LeaseBatch[]): void {
    // Write-ahead, as the coordinator does: a batch leaves once what covers it is written.
    this.ledger.write(this.pool.takeChanges((ms) => ms))
    for (const batch of batches) {
      const p = this.processes.get(batch.clientKey as Id)
      if (p !== undefined && p.connected) p.inFlight.push({ batch, sentMs: this.nowMs })
    }
  }

  /** The process asks for each key at its demand since its last report, then reports as the client does. */
  report(p: Process): void {
    if (!p.connected) return
    const sinceSec = Math.max(0.001, (this.nowMs - p.lastReportMs) / 1000)
    p.lastReportMs = this.nowMs
    for (const k of keys) {
      const wants = p.wants[k] ?? 0
      if (wants <= 0) continue
      // One token a request, as many as the demand makes since the last report (at most 48):
      // buckets are spent to their last token, so what they hold is what the central bucket
      // is held to.
      const requests = Math.max(1, Math.round(wants * sinceSec))
      for (let n = 0; n < requests; n++) {
        if (!deciders.has(p.id)) {
          if (p.family.tryAcquire(keyOfId('k', k)!, 1)) this.admit(k, 1)
          continue
        }
        // A check may wait for the key's next lease (a key moving here), then be decided by
        // the process's part: counted when it is, at that time.
        const decided = p.family.decide(keyOfId('k', k)!, 1)
        if (decided === true) this.admit(k, 1)
        else if (decided !== false) {
          this.pending++
          void decided.then((a) => {
            this.pending--
            if (a.admitted) this.admit(k, 1)
          })
        }
      }
    }
    // As the coordinator's admission does (server/coordinator/admission.ts): a key not yet
    // leased on its own once the family has maxHotKeys of them is refused, and stays on the
    // default split (the Pool alone enforces no such limit).
    let added = 0
    const report = p.family.takeReport().filter((e) => {
      if (e.resource === FAMILY || this.pool.hasResource(e.resource)) return true
      if (this.pool.hotKeyCount(FAMILY) + added >= this.maxHotKeys) return false
      added++
      return true
    })
    this.enqueue(this.pool.reportDemand(p.id, report, this.nowMs).batches)
  }

  connect(p: Process): void {
    p.connected = true
    p.inFlight = []
    const clientId = p.id === central ? centralClientId : p.id
    this.pool.connect(p.id, clientId, undefined, p.instance, this.nowMs)
    this.report(p)
  }

  deliver(p: Process, ackLost: boolean): void {
    const next = p.inFlight.shift()
    if (next === undefined || !p.connected) return
    // A message later than graceMs is lost (the protocol's assumption): on one connection,
    // with every later one (a connection that holds a message that long is dropped, by the
    // heartbeat at the latest); the process connects again at once.
    if (this.nowMs - next.sentMs > 200) {
      this.disconnect(p)
      return this.connect(p)
    }
    // What a key's own lease gave up as it fell goes with the ack, as the client sends it
    // (client/client.ts, `gave`; server/pool/clients.ts `noteGiven`).
    let gave: [string, number][] | undefined
    for (const l of next.batch.leases) {
      if (l.resource === FAMILY) p.family.applyFamilyLease(l)
      else p.family.applyKeyLease(keyOfId('k', l.resource)!, l)
      const given = p.family.takeGave(l.resource)
      if (given > 0) (gave ??= []).push([l.resource, given])
    }
    // What a fall a joiner waited for gave up goes with the ack, as the client sends it
    // (server/pool/fall-gifts.ts); lost with it, it is given to nobody.
    const fallen = p.family.takeFallHeld(FAMILY)
    // A rate lease is in force at once: the whole batch is acknowledged.
    if (!ackLost)
      this.enqueue(
        this.pool.acknowledge(
          p.id,
          next.batch.seq,
          undefined,
          this.nowMs,
          gave,
          fallen === undefined ? undefined : [fallen],
        ),
      )
  }

  round(id: string): void {
    this.enqueue(this.pool.round(id, this.nowMs))
    this.enqueue(this.pool.grantWaiting(id, this.nowMs))
  }

  disconnect(p: Process): void {
    if (!p.connected) return
    p.connected = false
    p.inFlight = []
    this.pool.disconnect(p.id, this.nowMs)
  }

  /**
   * The coordinator's own part dies with its process (or fails) and a new one takes its id: the
   * old one admits nothing from now (its buckets die with it) and the new one, another instance,
   * starts with nothing (server/pool/clients.ts `freeDeadCentral` frees the old one's leases).
   */
  restartCentral(): void {
    const old = this.processes.get(central)!
    if (!old.connected) return
    this.disconnect(old)
    const next = new Process(central, this.clock, `${central}-instance-${++this.centralRestarts}`)
    next.wants = { ...old.wants }
    this.processes.set(central, next)
    this.connect(next)
  }

  centralRestarts = 0

  /**
   * The coordinator is SIGKILLed and restarted from its ledger: every connection drops (what
   * was on its way is lost), its own part dies with it (a new instance takes its id), and the
   * processes go on enforcing what they hold until they connect again (`join`).
   */
  restartCoordinator(): void {
    for (const p of this.processes.values()) {
      p.connected = false
      p.inFlight = []
    }
    const old = this.processes.get(central)!
    const next = new Process(central, this.clock, `${central}-instance-${++this.centralRestarts}`)
    next.wants = { ...old.wants }
    this.processes.set(central, next)
    const settings = this.#settings
    this.pool = new Pool(this.nowMs, (id) => settings.get(id), { track: true, learn: false })
    this.pool.restore(this.ledger.entries(), (ms) => ms, this.nowMs)
    // As the coordinator does (coordinator.ts, #restore): what the restore learned is written.
    this.ledger.write(this.pool.takeChanges((ms) => ms))
  }

  /**
   * Closed cleanly, for good (a rolling deploy's SIGTERM): it releases its share with what it
   * held (server/pool/held-handover.ts) and its keys, and enforces nothing from then on.
   */
  close(p: Process): void {
    if (!p.connected || p.id === central) return
    const held = p.family.heldAtClose()
    const ids = [FAMILY, ...keys.filter((k) => p.family.leaseOf(keyOfId('k', k)!).source === 'key')]
    p.family.close()
    p.closed = true
    this.enqueue(this.pool.release(p.id, ids, this.nowMs, undefined, held ? [held] : []))
    this.disconnect(p)
    p.crashed = true
  }

  /** Checks decided later (waiting for a key's lease): settled by `flush`. */
  pending = 0

  /** Levels of one exact central bucket per key (capacity/s, burst `capacity`), fed every admission. */
  readonly central = new Map<string, { level: number; atMs: number }>()

  /**
   * `cost` of `key` admitted by a process: one central bucket of the key, fed every admission
   * of every process, never goes below 0 (what they admit together is within capacity·t +
   * burst over any interval; tokens a share closed cleanly hands on,
   * held-handover.ts, must move, never be made).
   */
  admit(key: string, cost: number): void {
    const c = this.central.get(key) ?? { level: capacity, atMs: this.nowMs }
    c.level = Math.min(capacity, c.level + ((this.nowMs - c.atMs) * capacity) / 1000) - cost
    c.atMs = this.nowMs
    this.central.set(key, c)
    expect(c.level, `${key} at ${this.nowMs} ms`).toBeGreaterThanOrEqual(-1e-6 * capacity)
  }

  check(): void {
    for (const k of keys) {
      let sum = 0
      for (const p of this.processes.values()) sum += p.enforces(k)
      expect(sum, `${k} at ${this.nowMs} ms`).toBeLessThanOrEqual(capacity * (1 + 1e-9) + 1e-9)
      // What the processes' buckets hold of the key (whole tokens: what each could admit at
      // once) never exceeds what its central bucket holds now, or they could spend it all
      // together past it. A crashed process may still spend what it holds; a closed one not.
      let holding = 0
      for (const p of this.processes.values())
        if (!p.closed) holding += p.family.remaining(keyOfId('k', k)!)
      const c = this.central.get(k)
      const central =
        c === undefined
          ? capacity
          : Math.min(capacity, c.level + ((this.nowMs - c.atMs) * capacity) / 1000)
      expect(holding, `${k} held at ${this.nowMs} ms`).toBeLessThanOrEqual(central + 1e-6)
    }
  }
}

type Step =
  | { op: 'join' | 'report' | 'disconnect' | 'crash' | 'close'; p: Id }
  | { op: 'restart-central' | 'restart-coordinator' }
  | { op: 'deliver'; p: Id; ackLost: boolean }
  | { op: 'want'; p: Id; key: number; wants: number }
  | { op: 'round'; key: number }
  | { op: 'advance'; ms: number }
  /** A refresh period of everyone: time, reports, rounds, and some deliveries (acks lost at random). */
  | { op: 'tick'; ms: number; deliveries: readonly number[]; lost: readonly boolean[] }

const step: fc.Arbitrary<Step> = fc.oneof(
  fc.record({
    op: fc.constantFrom('join', 'report', 'disconnect', 'crash', 'close'),
    p: fc.constantFrom(...ids),
  }),
  fc.record({ op: fc.constantFrom('restart-central', 'restart-coordinator') }),
  fc.record({ op: fc.constant('deliver'), p: fc.constantFrom(...ids), ackLost: fc.boolean() }),
  fc.record({
    op: fc.constant('deliver'),
    p: fc.constantFrom(...ids),
    ackLost: fc.constant(false),
  }),
  fc.record({
    op: fc.constant('want'),
    p: fc.constantFrom(...ids),
    key: fc.integer({ min: 0, max: keys.length - 1 }),
    wants: fc.constantFrom(0, 1, 5, 12, 40),
  }),
  fc.record({ op: fc.constant('round'), key: fc.integer({ min: -1, max: keys.length - 1 }) }),
  fc.record({ op: fc.constant('advance'), ms: fc.constantFrom(10, 50, 150, 400, 1200) }),
  fc.record({
    op: fc.constant('tick'),
    ms: fc.constantFrom(20, 100, 250),
    deliveries: fc.array(fc.integer({ min: 0, max: 3 }), {
      minLength: ids.length,
      maxLength: ids.length,
    }),
    lost: fc.array(fc.boolean(), { minLength: ids.length, maxLength: ids.length }),
  }),
  fc.record({
    op: fc.constant('tick'),
    ms: fc.constantFrom(20, 100, 250),
    deliveries: fc.constant(ids.map(() => 3)),
    lost: fc.constant(ids.map(() => false)),
  }),
)

/** `n` refresh periods of 100 ms: every process reports, a round, every lease delivered, checked. */
async function settleRounds(w: World, n: number): Promise<void> {
  for (let i = 0; i < n; i++) {
    w.clock.advance(100)
    await flush(w)
    for (const q of w.processes.values()) w.report(q)
    w.round(FAMILY)
    for (const q of w.processes.values())
      for (let k = 0; k < 3; k++) {
        w.deliver(q, false)
        await flush(w)
      }
    w.check()
  }
}

/**
 * Lets checks that waited for a key's lease be decided, as the client decides them once the
 * batch that brought the lease is applied (microtasks): a few turns while any is pending.
 */
async function flush(w: World): Promise<void> {
  for (let i = 0; i < 12 && w.pending > 0; i++) await Promise.resolve()
}

/** Runs steps, checking the promise after each; returns the world as the steps left it. */
async function run(steps: readonly Step[], settings = manyHotKeys): Promise<World> {
  const w = new World(settings)
  for (const s of steps) await run1(w, s)
  return w
}

/** Runs one step, checking the promise after it. */
async function run1(w: World, s: Step): Promise<void> {
  const p = 'p' in s ? w.processes.get(s.p)! : undefined
  switch (s.op) {
    case 'join':
      if (!p!.connected && !p!.crashed) w.connect(p!)
      break
    case 'report':
      w.report(p!)
      break
    case 'disconnect':
      w.disconnect(p!)
      break
    case 'crash':
      // Gone for good, still enforcing what it holds until it lapses.
      w.disconnect(p!)
      p!.crashed = true
      break
    case 'close':
      w.close(p!)
      break
    case 'restart-central':
      w.restartCentral()
      break
    case 'restart-coordinator':
      w.restartCoordinator()
      break
    case 'deliver':
      w.deliver(p!, s.ackLost)
      await flush(w)
      break
    case 'want':
      p!.wants[keys[s.key]!] = s.wants
      break
    case 'round':
      w.round(s.key < 0 ? FAMILY : keys[s.key]!)
      break
    case 'advance':
      w.clock.advance(s.ms)
      await flush(w)
      break
    case 'tick':
      w.clock.advance(s.ms)
      await flush(w)
      w.check()
      for (const q of w.processes.values()) w.report(q)
      w.round(FAMILY)
      for (const k of keys) w.round(k)
      for (const [i, q] of [...w.processes.values()].entries())
        for (let n = 0; n < s.deliveries[i]!; n++) {
          w.deliver(q, s.lost[i]! && n === 0)
          await flush(w)
          w.check()
        }
      break
  }
  w.check()
}

const tick: Step = {
  op: 'tick',
  ms: 100,
  deliveries: ids.map(() => 3),
  lost: ids.map(() => false),
}

/** Every other process joins, and the deciders ask for k/a: crowded once they report. */
const crowd: Step[] = [
  { op: 'join', p: 's' },
  { op: 'join', p: 't' },
  { op: 'join', p: 'u' },
  { op: 'join', p: 'c' },
  { op: 'want', p: 'p', key: 0, wants: 1 },
  { op: 'want', p: 'q', key: 0, wants: 1 },
  { op: 'want', p: 'r', key: 0, wants: 1 },
]

/**
 * A crowded family settled: p, q and r deciding, `checking` with tryAcquire alone, the other
 * processes joined and idle, six refresh periods on.
 */
function crowdedRun(checking: readonly Id[]): Promise<World> {
  return run([
    { op: 'join', p: 'p' },
    { op: 'join', p: 'q' },
    { op: 'join', p: 'r' },
    ...crowd,
    ...checking.map((p): Step => ({ op: 'want', p, key: 0, wants: 1 })),
    ...Array.from({ length: 6 }, () => tick),
  ])
}

/** One refresh period of 100 ms: reports, rounds of the family and its keys, every lease delivered, checked. */
async function tickAll(w: World): Promise<void> {
  await settleRounds(w, 1)
  for (const k of keys) w.round(k)
  for (const q of w.processes.values())
    for (let n = 0; n < 3; n++) {
      w.deliver(q, false)
      await flush(w)
    }
  w.check()
}

/**
 * p, q and r join, and p asks 40/s of k/a (a key of 12/s): q and r keep their seeded share of
 * the key for a refresh period (250 ms) unless they report it (hot-key.ts); then it moves,
 * through decrease, ack, increase, and p holds the whole key.
 */
const hotAtP: Step[] = [...pAsksA(), ...Array.from({ length: 7 }, () => tick)]

/** p, q and r join, and three periods on p asks 40/s of k/a (a key of 12/s). */
function pAsksA(): Step[] {
  return [
    { op: 'join', p: 'p' },
    { op: 'join', p: 'q' },
    { op: 'join', p: 'r' },
    tick,
    tick,
    tick,
    { op: 'want', p: 'p', key: 0, wants: 40 },
  ]
}

const tickWithout = (p: Id): Step => ({
  op: 'tick',
  ms: 100,
  deliveries: ids.map((id) => (id === p ? 0 : 3)),
  lost: ids.map(() => false),
})

describe('keyed families in the pool (model)', () => {
  it('resends a key lease lost with a connection along with the next family lease', async () => {
    await run([
      { op: 'join', p: 'p' },
      { op: 'join', p: 'q' },
      { op: 'join', p: 'r' },
      tick,
      tick,
      { op: 'want', p: 'p', key: 0, wants: 40 },
      // q never receives the lease of the hot key: its connection drops with it on the way.
      tickWithout('q'),
      { op: 'disconnect', p: 'q' },
      { op: 'join', p: 'q' },
      ...Array.from({ length: 20 }, () => tick),
    ])
  })

  it('moves a hot key to its user only once the other holders gave up their default share of it', async () => {
    const w = await run(hotAtP)
    // p asks for 40/s of a key of 12/s: it holds the whole key, leased on its own; the others
    // gave their default shares of it up (each check above held the bound on the way).
    const [p, q, r] = (['p', 'q', 'r'] as const).map((id) => w.processes.get(id)!)
    expect(p!.family.leaseOf('a')).toMatchObject({ source: 'key' })
    expect(p!.enforces('k/a')).toBeCloseTo(capacity, 9)
    expect(q!.enforces('k/a')).toBe(0)
    expect(r!.enforces('k/a')).toBe(0)
    // A key nobody asks for stays on the default split: a third each.
    expect(q!.enforces('k/b')).toBeCloseTo(capacity / 3, 9)
  })

  // A hot key's fall hands on what its bucket gave up (its ack's `gave`, clients.ts
  // `noteGiven`) to the rise the ack lets through: a process that joins and asks for a hot key
  // starts with tokens of it, not empty (#41, "a 6th joins": the joiner's hot keys at 72-76% of
  // the central limiter). Without the gift t held 0 tokens after its rise.
  it("starts a hot key's rise at a joiner with what the fall it waited for gave up", async () => {
    const w = await run([
      { op: 'join', p: 's' },
      tick,
      tick,
      { op: 'want', p: 's', key: 0, wants: 40 },
      ...Array.from({ length: 8 }, () => tick),
      // s asks less (one a report) and stays idle a while: its bucket of k/a fills.
      { op: 'want', p: 's', key: 0, wants: 1 },
      ...Array.from({ length: 4 }, () => tick),
      { op: 'advance', ms: 400 },
      { op: 'join', p: 't' },
      { op: 'want', p: 't', key: 0, wants: 40 },
    ])
    const [s, t] = (['s', 't'] as const).map((id) => w.processes.get(id)!)
    expect(s!.family.leaseOf('a').source).toBe('key')
    expect(s!.family.remaining('a')).toBeGreaterThan(2)
    // s falls for t, and t's lease of k/a rises as s's ack comes (each step checked against
    // the key's central bucket: what they hold together never exceeds it).
    await run1(w, tick)
    await run1(w, tick)
    expect(t!.family.leaseOf('a')).toMatchObject({ source: 'key' })
    expect(t!.family.leaseOf('a').capacity).toBeGreaterThan(0)
    expect(t!.family.remaining('a')).toBeGreaterThan(0)
  })

  // A joiner's rise of a hot key is granted whole as the last fall made for it is acknowledged.
  // Each ack's gift was kept only while that ack was handled, so the rise held the last faller's
  // alone: the others' were dropped (one run of "a 6th joins", logged: of 189 rises 22 held any,
  // the joiner's 34 none). A hot key's gifts are now kept for the rise they pay for, within the
  // slices that gave them (server/pool/entry.ts, `giftRoom`).
  it("starts a hot key's rise at a joiner with what every fall made for it gave, not only the last", async () => {
    const w = await run([
      { op: 'join', p: 's' },
      { op: 'join', p: 'u' },
      tick,
      tick,
      { op: 'want', p: 's', key: 0, wants: 40 },
      { op: 'want', p: 'u', key: 0, wants: 40 },
      ...Array.from({ length: 8 }, () => tick),
      { op: 'want', p: 's', key: 0, wants: 1 },
      { op: 'want', p: 'u', key: 0, wants: 1 },
      ...Array.from({ length: 4 }, () => tick),
      { op: 'advance', ms: 400 },
      { op: 'join', p: 't' },
      { op: 'want', p: 't', key: 0, wants: 40 },
    ])
    const [s, u, t] = (['s', 'u', 't'] as const).map((id) => w.processes.get(id)!)
    for (const p of [s!, u!]) expect(p.family.leaseOf('a').source).toBe('key')
    await run1(w, tick)
    await run1(w, { op: 'want', p: 't', key: 0, wants: 0 })
    // s falls 6 -> 2 and u 6 -> 4 for t (each acknowledged in turn, each giving what its fall
    // left above its new burst); t's rise to 4 holds their gifts as an excess: at least a token.
    let most = 0
    for (let i = 0; i < 3; i++) {
      await run1(w, tick)
      most = Math.max(most, t!.family.remaining('a'))
    }
    expect(most).toBeGreaterThanOrEqual(1)
  })

  it('sends a key nobody asks for any more back to the default split, every holder told', async () => {
    const w = await run([
      ...pAsksA(),
      tick,
      tick,
      tick,
      tick,
      { op: 'want', p: 'p', key: 0, wants: 0 },
      ...Array.from({ length: 10 }, () => tick),
    ])
    expect(w.pool.hotKeyCount(FAMILY)).toBe(0)
    for (const id of ['p', 'q', 'r'] as const) {
      expect(w.processes.get(id)!.family.leaseOf('a').source, id).toBe('default')
      expect(w.processes.get(id)!.enforces('k/a')).toBeCloseTo(capacity / 3, 9)
    }
  })

  it("moves the deciding processes' default shares to the coordinator's part once the family is crowded, and back when it is not", async () => {
    // s, t and u check with tryAcquire alone (a process that has checked nothing holds no
    // default share of a crowded family: the next test).
    const w = await crowdedRun(['s', 't', 'u'])
    // p, q and r decide: none holds a default share; the coordinator's part holds theirs (a
    // weight of 3), s, t and u a sixth each.
    for (const id of ['p', 'q', 'r'] as const) expect(w.processes.get(id)!.enforces('k/b')).toBe(0)
    expect(w.processes.get('c')!.enforces('k/b')).toBeCloseTo(capacity / 2, 9)
    for (const id of ['s', 't', 'u'] as const)
      expect(w.processes.get(id)!.enforces('k/b')).toBeCloseTo(capacity / 6, 9)
    const settle = (): Promise<void> => settleRounds(w, 40)
    // One leaves (a rolling deploy's close, before its replacement): five processes stay
    // crowded once they were, so nothing moves back and forth.
    w.disconnect(w.processes.get('u')!)
    await settle()
    for (const id of ['p', 'q', 'r'] as const) expect(w.processes.get(id)!.enforces('k/b')).toBe(0)
    expect(w.processes.get('c')!.enforces('k/b')).toBeGreaterThan(capacity / 2)
    // Another leaves for good: four are not crowded; every process holds a default again.
    w.disconnect(w.processes.get('t')!)
    await settle()
    for (const id of ['p', 'q', 'r', 's'] as const)
      expect(w.processes.get(id)!.enforces('k/b'), id).toBeGreaterThan(0)
  })

  it('gives a process that joins a crowded family no default share until it checks: then one by its traffic', async () => {
    const w = await crowdedRun(['s', 't'])
    // u joined and has checked nothing: whether it will ask the coordinator or decide here, a
    // share now would most likely move again (#41: 30 gateways starting together). Its part
    // is the coordinator's meanwhile (a weight of 4 there: p, q, r and u).
    expect(w.processes.get('u')!.enforces('k/b')).toBe(0)
    for (const id of ['s', 't'] as const)
      expect(w.processes.get(id)!.enforces('k/b')).toBeCloseTo(capacity / 6, 9)
    expect(w.processes.get('c')!.enforces('k/b')).toBeCloseTo((capacity * 4) / 6, 9)
    // It checks (tryAcquire alone): its reports say so, and it gets its place by traffic.
    w.processes.get('u')!.wants['k/a'] = 1
    await settleRounds(w, 10)
    for (const id of ['s', 't', 'u'] as const)
      expect(w.processes.get(id)!.enforces('k/b'), id).toBeCloseTo(capacity / 6, 9)
    expect(w.processes.get('c')!.enforces('k/b')).toBeCloseTo(capacity / 2, 9)
  })

  it("gives the coordinator's part a key hot by the processes it now decides for: held, not dropped until its next report", async () => {
    // p uses k/a heavily and holds it whole (three processes: not crowded, its share decides).
    // Then four more join, the coordinator's part among them: crowded, p (deciding) holds
    // nothing, and k/a is asked by nobody else that holds it; the coordinator's part must
    // hold it, as p asked for it, or nobody would until that part's own report (#41).
    const w = await run([
      ...hotAtP,
      { op: 'join', p: 's' },
      { op: 'join', p: 't' },
      { op: 'join', p: 'u' },
      { op: 'join', p: 'c' },
    ])
    expect(w.processes.get('p')!.enforces('k/a')).toBeCloseTo(capacity, 9)
    const held: number[] = []
    for (let i = 0; i < 3; i++) {
      await tickAll(w)
      held.push(w.processes.get(central)!.enforces('k/a'))
    }
    expect(w.pool.hasResource('k/a')).toBe(true)
    for (const id of ['p', 'q', 'r', 's', 't', 'u'] as const)
      expect(w.processes.get(id)!.enforces('k/a'), id).toBe(0)
    // Within a refresh period of the family turning crowded, and kept.
    expect(held).toEqual([capacity, capacity, capacity])
  })

  // Random steps rarely drain a key on the default split and then bring a new process within a
  // vacancy's patience (about 30 runs in 1,000): a handover that handed full buckets went
  // unfound by the properties below. Here both happen: s and t spend every token of k/b (k/a
  // is the one hot key, so k/b stays on the default split), s closes, u joins at once and
  // asks k/b. What u starts with is what s held, and s held nothing.
  it('hands a closed share on with what it held, never more: a drained key stays drained at the heir', async () => {
    const drain = (p: Id): Step => ({ op: 'want', p, key: 1, wants: 40 })
    const w = await run(
      [
        { op: 'join', p: 's' },
        { op: 'join', p: 't' },
        tick,
        tick,
        { op: 'want', p: 's', key: 0, wants: 40 },
        // A burst's refill time and more before k/b is asked: s's and t's buckets hold all of
        // it then, as the central bucket does (the first shares started with part of it).
        ...Array.from({ length: 15 }, () => tick),
        drain('s'),
        drain('t'),
        ...Array.from({ length: 10 }, () => tick),
        { op: 'close', p: 's' },
        { op: 'join', p: 'u' },
        drain('u'),
        ...Array.from({ length: 10 }, () => tick),
      ],
      familySettings(1),
    )
    // u took s's share (a half of every key) and spends k/b as it earns it.
    expect(w.processes.get('u')!.enforces('k/b')).toBeCloseTo(capacity / 2, 9)
  })

  // The same shape, drawn: how long the buckets filled before the key was asked, how hard each
  // asks, how long after the close the heir comes (within the patience or not), then random
  // steps. Handing full buckets, or 200 ms of the share's earning too many, fails here (50 ms,
  // under a token here, does not).
  it(
    'never lets an heir admit more of a key than one central bucket, however drained the key was at the close',
    { timeout: 120_000 },
    async () => {
      const fewHotKeys = familySettings(1)
      await fc.assert(
        fc.asyncProperty(
          fc.integer({ min: 0, max: 15 }),
          fc.constantFrom(5, 12, 40),
          fc.constantFrom(5, 12, 40),
          fc.integer({ min: 0, max: 10 }),
          fc.constantFrom(0, 10, 50, 150, 400, 1200),
          fc.constantFrom(1, 5, 12, 40),
          fc.array(step, { maxLength: 12, size: 'max' }),
          async (idle, sWants, tWants, drained, gapMs, uWants, steps) => {
            await run(
              [
                { op: 'join', p: 's' },
                { op: 'join', p: 't' },
                tick,
                tick,
                { op: 'want', p: 's', key: 0, wants: 40 },
                ...Array.from({ length: idle }, () => tick),
                { op: 'want', p: 's', key: 1, wants: sWants },
                { op: 'want', p: 't', key: 1, wants: tWants },
                ...Array.from({ length: drained }, () => tick),
                { op: 'close', p: 's' },
                { op: 'advance', ms: gapMs },
                { op: 'join', p: 'u' },
                { op: 'want', p: 'u', key: 1, wants: uWants },
                tick,
                tick,
                ...steps,
                tick,
              ],
              fewHotKeys,
            )
          },
        ),
        // 25 ms a run (its prefix is 30 ticks and more): 200 at most, 5 s. Each of the two
        // mutations above failed within 10 runs (hand the heir 200 ms of earning too many: 3).
        { numRuns: Math.min(200, fc.readConfigureGlobal().numRuns ?? 100) },
      )
    },
  )

  // A thousand runs in CI (FC_NUM_RUNS) take 25-35 s on a busy 2-core machine, past the
  // default 30 s: it timed out in a clean-clone CI (eaceac7), and at 6c8b641 under the same
  // load (33.8 s), with no counterexample either time.
  it(
    'never lets the processes together enforce more of a key than its capacity, through joins, hot keys, lost acks, crashes and lapses',
    { timeout: 120_000 },
    async () => {
      await fc.assert(
        // From three holders with their default shares split, so random steps start somewhere.
        // Half the runs start with every process joined and the deciders asking: crowded, so the
        // coordinator's part holds their default shares.
        fc.asyncProperty(
          fc.boolean(),
          fc.array(step, { minLength: 1, maxLength: 160, size: 'max' }),
          async (crowded, steps) => {
            await run([
              { op: 'join', p: 'p' },
              { op: 'join', p: 'q' },
              { op: 'join', p: 'r' },
              ...(crowded ? crowd : []),
              tick,
              tick,
              ...steps,
            ])
          },
        ),
        { numRuns: fc.readConfigureGlobal().numRuns ?? 100 },
      )
    },
  )

  // One hot key at most: the others are spent on the default shares, whose tokens go with a
  // share closed cleanly (held-handover.ts). The central bucket of each key (`admit`) is what
  // this run holds them to.
  it(
    'never lets the processes admit more of a key than one central bucket, keys on the default split, through joins, closes, crashes and lost acks',
    { timeout: 120_000 },
    async () => {
      const fewHotKeys = familySettings(1)
      await fc.assert(
        fc.asyncProperty(
          fc.array(step, { minLength: 1, maxLength: 160, size: 'max' }),
          async (steps) => {
            await run(
              [
                { op: 'join', p: 'p' },
                { op: 'join', p: 'q' },
                { op: 'join', p: 'r' },
                tick,
                tick,
                ...steps,
              ],
              fewHotKeys,
            )
          },
        ),
        { numRuns: fc.readConfigureGlobal().numRuns ?? 100 },
      )
    },
  )

  // Found by the property below in a clean-clone CI (seed 1311708754, 958 runs in): the
  // coordinator restarts, c asks k/a (hot: p, q and r seeded from their restored shares), p's
  // share lapses meanwhile, and p comes back with a first share that starts full and its seeded
  // lease of k/a in the same batch. It started k/a full of that share (12) while c spent 3 of
  // the key's central bucket: the key's lease continues what p's share held before (nothing).
  it('starts a key leased in the batch of a first share after a restart from what the old share held of it, not full', async () => {
    const L = ids.map(() => false)
    const w = await run(
      [
        { op: 'join', p: 'p' },
        { op: 'join', p: 'q' },
        { op: 'join', p: 'r' },
        tick,
        tick,
        { op: 'restart-coordinator' },
        { op: 'want', p: 'c', key: 0, wants: 5 },
        { op: 'tick', ms: 250, deliveries: [3, 3, 3, 3, 3, 3, 3], lost: L },
        { op: 'join', p: 'c' },
        { op: 'advance', ms: 1200 },
        { op: 'tick', ms: 20, deliveries: [0, 0, 0, 0, 0, 0, 2], lost: L },
        { op: 'join', p: 'p' },
        { op: 'advance', ms: 1200 },
        { op: 'tick', ms: 20, deliveries: [3, 3, 3, 3, 3, 3, 3], lost: L },
        { op: 'round', key: 0 },
      ],
      familySettings(1),
    )
    // p holds its seeded lease of k/a, empty as its share was when the batch came.
    expect(w.processes.get('p')!.family.leaseOf('a').source).toBe('key')
    expect(w.processes.get('p')!.family.remaining('a')).toBe(0)
  })
})
