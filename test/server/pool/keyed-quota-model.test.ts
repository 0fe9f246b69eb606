import fc from 'fast-check'
import { describe, expect, it } from 'vitest'
import { resolveKeyedOptions } from '../../../client/options.js'
import { KeyedFamily } from '../../../client/keyed/index.js'
import { CompiledConfig, parseConfig } from '../../../server/config/index.js'
import { MemoryLedger } from '../../../server/ledger/index.js'
import { Pool, centralClientId, type LeaseBatch } from '../../../server/pool/index.js'
import { ManualClock } from '../../../shared/index.js'

/**
 * Model-based test of keyed quotas: the pool against the client's own
 * `KeyedFamily` (client/keyed.ts), each process a real one on a manual
 * clock, the wire between them a queue that loses what is later than
 * graceMs. Random joins, reports, rounds of the family and its hot keys,
 * deliveries (acks lost, or held while what a key spent does not fit a
 * smaller budget), spending on every key, disconnects, releases
 * (`client.close()`, saying what was spent of each key, so that the share
 * is handed on: server/pool/handover.ts), crashes (a crashed process goes on spending what it
 * holds; a new process comes under its id), coordinator restarts from the
 * ledger, and time across windows.
 *
 * The check after every step, key by key and window by window, on what the
 * processes admitted: Σ over processes ≤ the key's budget.
 */

const windowMs = 10_000
const budget = 30
const configOf = (maxDefaultHolders?: number): CompiledConfig =>
  new CompiledConfig(
    parseConfig({
      resources: [
        {
          match: 'k/*',
          keyed: true,
          kind: 'quota',
          capacity: budget,
          window: '10s',
          refreshMs: 200,
          leaseTtlMs: 1000,
          graceMs: 100,
          keys: { b: { capacity: 12 } },
          ...(maxDefaultHolders === undefined ? {} : { maxDefaultHolders }),
        },
      ],
    }),
  )
const config = configOf()
/**
 * One default holder: the others hold none, and the coordinator's part holds a default share
 * for them (shapes/default-holders.ts), as in a crowded family.
 */
const oneHolder = configOf(1)
const FAMILY = 'k/*'
const keys = ['a', 'b', 'c'] as const
type Key = (typeof keys)[number]
const budgetOf = (key: Key): number => (key === 'b' ? 12 : budget)
const ids = ['p', 'q', 'r'] as const
/**
 * The coordinator's own part (server/coordinator/central.ts): a process under its id, which
 * writes what it admits of each key before its answers leave (spend-reserve.ts: here, each
 * admission is reserved and written to the ledger before it counts), and dies with the
 * coordinator (it goes on spending nothing). The random runs have it; the named cases not.
 */
const centralId = 'x'
const allIds = [...ids, centralId] as const
type Id = (typeof allIds)[number]
const noSpent = () => ({ window: Number.NaN, used: 0, nextWindow: -1, nextUsed: 0 })
const owner = { requestEarlyReport: () => undefined, drained: () => undefined }

class Process {
  connected = false
  generation = 0
  inFlight: { batch: LeaseBatch; sentMs: number }[] = []
  /** Acks held back: resource → batch seq (a key whose spending does not fit yet). */
  readonly held = new Map<string, number>()
  family: KeyedFamily
  /** Processes of earlier generations (crashed): they spend what they hold until it runs out. */
  readonly ghosts: KeyedFamily[] = []

  constructor(
    readonly id: Id,
    readonly clock: ManualClock,
  ) {
    this.family = new KeyedFamily(
      'k',
      resolveKeyedOptions('k', { maxKeys: 2 }),
      clock,
      clock,
      owner,
    )
  }

  renew(): void {
    this.family.close()
    this.family = new KeyedFamily(
      'k',
      resolveKeyedOptions('k', { maxKeys: 2 }),
      this.clock,
      this.clock,
      owner,
    )
    this.generation++
    this.held.clear()
  }
}

class World {
  readonly config: CompiledConfig
  readonly clock = new ManualClock(0, 0)
  readonly ledger = new MemoryLedger()
  pool: Pool
  readonly processes = new Map<Id, Process>(allIds.map((id) => [id, new Process(id, this.clock)]))
  /** Admitted per key and window, by every process (crashed ones included). */
  readonly admitted = new Map<string, number>()
  /**
   * Per key and window: what resets gave back (the most the pool ever said: a restarted
   * coordinator forgets a reset, and the key keeps what it had). A reset gives back at most
   * what was admitted when it took effect, so from then on at most one whole budget.
   */
  readonly givenBack = new Map<string, number>()
  /** Per key and window: what the pool said a reset gave back (givenBack is at most admitted). */
  readonly resetSaid = new Map<string, number>()
  /**
   * Per key and window: units admitted before the window's start by a check that spent of both
   * windows (quota-keys.ts, `straddle`: the coordinator's edge may lie on either side of it).
   * Counted in the next window's part as well, so a reset of that window may give them back.
   */
  readonly spentAhead = new Map<string, number>()

  constructor(config: CompiledConfig) {
    this.config = config
    this.pool = this.#newPool()
  }

  #newPool(): Pool {
    const { config } = this
    return new Pool(this.clock.now(), (id) => config.settingsFor(id), { track: true, learn: false })
  }

  get nowMs(): number {
    return this.clock.now()
  }

  enqueue(batches: readonly LeaseBatch[]): void {
    this.ledger.write(this.pool.takeChanges((ms) => ms))
    for (const batch of batches) {
      const p = this.processes.get(batch.clientKey as Id)
      if (p !== undefined && p.connected) p.inFlight.push({ batch, sentMs: this.nowMs })
    }
  }

  connect(p: Process): void {
    if (p.connected) return
    p.connected = true
    p.inFlight = []
    p.held.clear()
    const clientId = p.id === centralId ? centralClientId : p.id
    this.pool.connect(p.id, clientId, undefined, `${p.id}-${p.generation}`, this.nowMs)
    this.report(p)
  }

  report(p: Process): void {
    if (!p.connected) return
    const report = p.family.takeReport()
    const out = this.pool.reportDemand(p.id, report, this.nowMs)
    // The client reports what it spent, as it counts it: never answered as more than it may
    // have spent (SLUICE_ERR_REPORT_INVALID).
    const over = report.filter((r) => out.overReported.includes(r.resource))
    expect(over, `${p.id} at ${this.nowMs}`).toEqual([])
    this.enqueue(out.batches)
  }

  deliver(p: Process, ackLost: boolean): void {
    const next = p.inFlight.shift()
    if (next === undefined || !p.connected) return
    // Later than graceMs: lost, with every later message of the connection (see the family
    // model); the process connects again at once.
    if (this.nowMs - next.sentMs > 100) {
      this.disconnect(p)
      return this.connect(p)
    }
    const ready: string[] = []
    for (const sent of next.batch.leases) {
      // As client.ts places it: with a next window sent ahead, the lease lasts to that one's end.
      const ahead = sent.window?.next
      const grant =
        ahead === undefined ? sent : { ...sent, ttlMs: Math.max(sent.ttlMs, ahead.endsInMs) }
      const inForce =
        grant.resource === FAMILY
          ? p.family.applyFamilyLease(grant)
          : p.family.applyKeyLease(grant.resource.slice(2), grant)
      if (inForce) {
        p.held.delete(grant.resource)
        ready.push(grant.resource)
      } else p.held.set(grant.resource, next.batch.seq)
    }
    if (ackLost) return
    this.enqueue(this.pool.acknowledge(p.id, next.batch.seq, ready, this.nowMs))
    // A held-back ack goes once the key's spending fits (client.ts's drained()).
    for (const [id, seq] of [...p.held]) {
      if (!p.family.keyFits(id.slice(2))) continue
      p.held.delete(id)
      this.enqueue(this.pool.acknowledge(p.id, seq, [id], this.nowMs))
    }
  }

  spend(family: KeyedFamily, key: Key, n: number, central = false): void {
    for (let i = 0; i < n; i++) {
      const ahead = this.#spentAheadOf(family, key)
      if (!family.tryAcquire(key)) return
      const nextWindow = Math.floor(this.nowMs / windowMs) + 1
      if (
        this.#spentAheadOf(family, key) > ahead &&
        family.spentOf(key, noSpent()).nextWindow === nextWindow
      ) {
        const at = `${key}@${nextWindow}`
        this.spentAhead.set(at, (this.spentAhead.get(at) ?? 0) + 1)
      }
      // The coordinator's part answers once what it spent of the key is written as reserved.
      if (central && !this.#reserve(family, key)) continue
      const at = `${key}@${Math.floor(this.nowMs / windowMs)}`
      this.admitted.set(at, (this.admitted.get(at) ?? 0) + 1)
    }
  }

  #spentAheadOf(family: KeyedFamily, key: Key): number {
    const spent = family.spentOf(key, noSpent())
    return spent.nextWindow === Math.floor(this.nowMs / windowMs) + 1 ? spent.nextUsed : 0
  }

  #reserve(family: KeyedFamily, key: Key): boolean {
    const spent = family.spentOf(key, noSpent())
    let ok = true
    if (!Number.isNaN(spent.window))
      ok &&= this.pool.reserveSpend(centralId, FAMILY, spent.window, [[key, spent.used]])
    if (spent.nextWindow >= 0)
      ok &&= this.pool.reserveSpend(centralId, FAMILY, spent.nextWindow, [[key, spent.nextUsed]])
    this.ledger.write(this.pool.takeChanges((ms) => ms))
    return ok
  }

  round(): void {
    const ids = this.pool.familyIds(FAMILY)
    this.enqueue(this.pool.roundMany(ids, this.nowMs))
    this.enqueue(this.pool.grantWaitingMany(ids, this.nowMs))
    // A reset takes effect in a round: it may give back no more than was admitted by then (and
    // spent ahead of the window, counted in it too). The check counts at most what was admitted:
    // from the reset on, one whole budget, never more.
    for (const key of keys) {
      const reset = this.pool.keyLookup('k', key, this.nowMs)?.reset
      if (reset === undefined || reset.pending) continue
      const at = `${key}@${Math.floor(this.nowMs / windowMs)}`
      const before = this.resetSaid.get(at) ?? 0
      if (reset.givenBack === before) continue
      const admitted = this.admitted.get(at) ?? 0
      expect(reset.givenBack, `reset of ${at}: given back`).toBeLessThanOrEqual(
        admitted + (this.spentAhead.get(at) ?? 0),
      )
      this.resetSaid.set(at, Math.max(before, reset.givenBack))
      this.givenBack.set(
        at,
        Math.max(this.givenBack.get(at) ?? 0, Math.min(reset.givenBack, admitted)),
      )
    }
  }

  /** The leases sent again just before a window's end, with the next window's shares ahead. */
  renewEdges(): void {
    this.enqueue(this.pool.renewEdges(this.pool.familyIds(FAMILY), this.nowMs))
  }

  reset(key: Key): void {
    this.enqueue(this.pool.resetKey('k', key, this.nowMs).batches)
  }

  disconnect(p: Process): void {
    if (!p.connected) return
    p.connected = false
    p.inFlight = []
    this.pool.disconnect(p.id, this.nowMs)
  }

  restartCoordinator(): void {
    for (const p of this.processes.values()) {
      p.connected = false
      p.inFlight = []
      // The coordinator's part dies with it.
      if (p.id === centralId) p.renew()
    }
    this.pool = this.#newPool()
    this.pool.restore(this.ledger.entries(), (ms) => ms, this.nowMs)
  }

  check(): void {
    for (const [at, n] of this.admitted) {
      const key = at.split('@')[0] as Key
      expect(n, `key ${at} at ${this.nowMs} ms`).toBeLessThanOrEqual(
        budgetOf(key) + (this.givenBack.get(at) ?? 0),
      )
    }
  }
}

type Step =
  | { op: 'join' | 'report' | 'disconnect' | 'crash' | 'release'; p: Id }
  | { op: 'deliver'; p: Id; ackLost: boolean }
  | { op: 'spend'; p: Id; key: Key; n: number; ghost: boolean }
  | { op: 'round' | 'restart' | 'edge' }
  | { op: 'reset'; key: Key }
  | { op: 'advance'; ms: number }
  /** A refresh period of everyone: time, reports, a round, spending, deliveries. */
  | { op: 'tick'; ms: number; spend: readonly [Id, Key, number][]; lost: boolean }

const id = fc.constantFrom(...allIds)
const key = fc.constantFrom(...keys)
const step: fc.Arbitrary<Step> = fc.oneof(
  { weight: 2, arbitrary: fc.record({ op: fc.constantFrom('join', 'report'), p: id }) },
  {
    weight: 1,
    arbitrary: fc.record({ op: fc.constantFrom('disconnect', 'crash', 'release'), p: id }),
  },
  {
    weight: 3,
    arbitrary: fc.record({ op: fc.constant('deliver'), p: id, ackLost: fc.boolean() }),
  },
  {
    weight: 4,
    arbitrary: fc.record({
      op: fc.constant('spend'),
      p: id,
      key,
      n: fc.integer({ min: 1, max: 15 }),
      ghost: fc.boolean(),
    }),
  },
  { weight: 2, arbitrary: fc.record({ op: fc.constant('round') }) },
  // The renewal before a window's end (edge-renewal.ts): the next window's shares sent ahead.
  { weight: 2, arbitrary: fc.record({ op: fc.constant('edge') }) },
  { weight: 1, arbitrary: fc.record({ op: fc.constant('reset'), key }) },
  { weight: 1, arbitrary: fc.record({ op: fc.constant('restart') }) },
  {
    weight: 2,
    arbitrary: fc.record({ op: fc.constant('advance'), ms: fc.constantFrom(50, 300, 2000, 7000) }),
  },
  {
    weight: 3,
    arbitrary: fc.record({
      op: fc.constant('tick'),
      ms: fc.constantFrom(100, 200),
      spend: fc.array(fc.tuple(id, key, fc.integer({ min: 0, max: 10 })), { maxLength: 3 }),
      lost: fc.boolean(),
    }),
  },
)

function run(steps: readonly Step[], withConfig = config): World {
  const w = new World(withConfig)
  for (const s of steps) {
    const p = 'p' in s ? w.processes.get(s.p)! : undefined
    switch (s.op) {
      case 'join':
        w.connect(p!)
        break
      case 'report':
        w.report(p!)
        break
      case 'disconnect':
        w.disconnect(p!)
        break
      case 'crash':
        // It goes on spending what it holds, unheard; a new process comes under its id.
        w.disconnect(p!)
        // The coordinator's part, failed, spends nothing more (a new one comes in its place).
        if (p!.id !== centralId) p!.ghosts.push(p!.family)
        p!.family = new KeyedFamily(
          'k',
          resolveKeyedOptions('k', { maxKeys: 2 }),
          w.clock,
          w.clock,
          owner,
        )
        p!.generation++
        p!.held.clear()
        break
      case 'release':
        // client.close(): what it holds is released, with what it spent of each key (the
        // share may be handed on), and a new process may start under its id.
        if (p!.connected) {
          const spent = p!.family.spentInWindow()
          const said = [...(spent === undefined ? [] : [spent]), ...p!.family.keyLeasesUsed()]
          w.enqueue(w.pool.release(p!.id, p!.family.leasedIds(), w.nowMs, said))
        }
        w.disconnect(p!)
        p!.renew()
        break
      case 'deliver':
        w.deliver(p!, s.ackLost)
        break
      case 'spend':
        {
          const family = s.ghost ? (p!.ghosts.at(-1) ?? p!.family) : p!.family
          w.spend(family, s.key, s.n, family === p!.family && p!.id === centralId)
        }
        break
      case 'round':
        w.round()
        break
      case 'restart':
        w.restartCoordinator()
        break
      case 'edge':
        w.renewEdges()
        break
      case 'reset':
        w.reset(s.key)
        break
      case 'advance':
        w.clock.advance(s.ms)
        break
      case 'tick':
        w.clock.advance(s.ms)
        for (const q of w.processes.values()) w.report(q)
        w.round()
        for (const [i, k, n] of s.spend) {
          w.spend(w.processes.get(i)!.family, k, n, i === centralId)
          w.check()
        }
        for (const q of w.processes.values())
          while (q.inFlight.length > 0) w.deliver(q, s.lost && q.inFlight.length === 1)
        break
    }
    w.check()
  }
  return w
}

/** A tick in which every process spends `spend` (key, units). */
const tick = (spend: readonly [Key, number][], lost = false): Step => ({
  op: 'tick',
  ms: 200,
  spend: ids.flatMap((i) => spend.map(([k, n]): [Id, Key, number] => [i, k, n])),
  lost,
})
const joinAll: Step[] = ids.map((p) => ({ op: 'join', p }))

describe('keyed quotas in the pool (model, against the client)', () => {
  it('gives each holder a default share of every key at once, and moves a hot key to whoever spends it', () => {
    const w = run([...joinAll, tick([]), tick([])])
    const p = w.processes.get('p')!
    // Three holders: a quarter of each key's budget each (three, and room for one more),
    // decided in-process at once.
    expect(p.family.leaseOf('a')).toMatchObject({ capacity: 7, source: 'default' })
    expect(p.family.leaseOf('b')).toMatchObject({ capacity: 3, source: 'default' })
    // Only p spends key a: its share, then the key is leased on its own and p gets what the
    // others do not use (all but their standing blocks).
    const spending: Step[] = Array.from({ length: 30 }, () => ({
      op: 'spend',
      p: 'p',
      key: 'a',
      n: 3,
      ghost: false,
    }))
    const steps: Step[] = []
    for (const s of spending) steps.push(s, tick([]))
    const after = run([...joinAll, tick([]), tick([]), ...steps])
    expect(after.admitted.get('a@0')).toBeGreaterThanOrEqual(budget - 2)
    expect(after.processes.get('p')!.family.leaseOf('a').source).toBe('key')
  })

  it('starts every key anew in the next window, a hot key with no default share taken twice', () => {
    const steps: Step[] = [...joinAll, tick([])]
    for (let i = 0; i < 20; i++) steps.push(tick([['a', 5]]))
    steps.push({ op: 'advance', ms: windowMs - 4_200 })
    for (let i = 0; i < 40; i++) steps.push(tick([['a', 5]]))
    const w = run(steps)
    expect(w.admitted.get('a@0')).toBeGreaterThanOrEqual(budget - 3)
    expect(w.admitted.get('a@1')).toBeGreaterThanOrEqual(budget - 3)
  })

  it('sends the next window’s parts ahead: spent from its start; a key leased on its own, by its block ahead, and never of the share (#41)', () => {
    const spend = (p: Id, key: Key, n: number): Step => ({ op: 'spend', p, key, n, ghost: false })
    const steps: Step[] = [{ op: 'join', p: 'p' }, { op: 'join', p: 'q' }, tick([])]
    // q spends a until a is leased on its own (to p too: a lease of nothing, as p asks none).
    for (let i = 0; i < 15; i++) steps.push(spend('q', 'a', 3), tick([]))
    // To 100 ms before window 0 ends (16 ticks of 200 ms so far), q still asking, every lease
    // acknowledged; then the leases sent again, with the next window's shares (a third of every
    // key each) and q's block of a.
    steps.push(
      { op: 'advance', ms: windowMs - 500 - 16 * 200 },
      { op: 'tick', ms: 200, spend: [['q', 'a', 1]], lost: false },
      tick([]),
    )
    steps.push({ op: 'edge' })
    for (const p of ['p', 'q'] as const) steps.push({ op: 'deliver', p, ackLost: false })
    // Past the edge, no round yet: p spends key c of the share sent ahead, and none of a (its
    // lease of a has no block ahead); q spends a of its block ahead.
    steps.push({ op: 'advance', ms: 150 }, spend('p', 'c', 12), spend('p', 'a', 12))
    steps.push(spend('q', 'a', 1))
    const before = run(steps)
    expect(before.processes.get('p')!.family.leaseOf('a').source).toBe('key')
    expect(before.admitted.get('c@1')).toBe(10)
    expect(before.admitted.get('a@1')).toBe(1)
    // Then the round at the edge, and q and p spend a as far as they are let: within its budget.
    const w = run([
      ...steps,
      { op: 'round' },
      ...Array.from({ length: 10 }, (): Step => ({
        op: 'tick',
        ms: 200,
        spend: [
          ['q', 'a', 10],
          ['p', 'a', 10],
        ],
        lost: false,
      })),
    ])
    expect(w.admitted.get('a@1')).toBeLessThanOrEqual(budget)
    expect(w.admitted.get('a@1')).toBeGreaterThanOrEqual(budget - 3)
  })

  it('counts the share sent ahead in a key that goes hot after it was sent: what a holder spends of it before hearing is the key’s (#41)', () => {
    const spend = (p: Id, key: Key, n: number): Step => ({ op: 'spend', p, key, n, ghost: false })
    const steps: Step[] = [{ op: 'join', p: 'p' }, { op: 'join', p: 'q' }, tick([])]
    // 500 ms before window 0 ends, every lease acknowledged: the leases sent again, with the
    // next window's shares (a third of every key each).
    steps.push({ op: 'advance', ms: windowMs - 700 - 200 }, tick([]), { op: 'edge' })
    for (const p of ['p', 'q'] as const) steps.push({ op: 'deliver', p, ackLost: false })
    // q spends its share of a, is refused, and says so: a goes hot; p's lease of it is on the
    // way, not delivered.
    steps.push(spend('q', 'a', 12), { op: 'report', p: 'q' })
    // Past the edge, no round yet: p spends a of the share sent ahead (a key of the default
    // share, as far as it knows).
    steps.push({ op: 'advance', ms: 550 }, spend('p', 'a', 12))
    const w = run(steps)
    expect(w.admitted.get('a@1')).toBe(10)
    // The key's entry of p counts p's share of window 1 (its seed of the share sent ahead, as the
    // ledger keeps it), though p said nothing of a: the key's rounds there leave it to p.
    const entry = w.ledger.entries().find((e) => e.clientKey === 'p' && e.resource === 'k/a')
    expect(entry?.ahead).toMatchObject({ window: 1, capacity: 10 })
    const holders = w.pool.keyLookup('k', 'a', w.nowMs)!.holders
    expect(holders.find((h) => h.client === 'p')?.committed).toBeGreaterThanOrEqual(10)
  })

  it('gives back on a key reset nothing spent between two windows (found by the model: 1 given back of 0)', () => {
    // q spends a unit of a between the windows (of both, the coordinator's clock in window 0),
    // then a is reset in window 1: that unit is not window 1's to give back.
    run([
      { op: 'join', p: 'q' },
      tick([]),
      { op: 'advance', ms: 9_000 },
      tick([]),
      { op: 'advance', ms: 300 },
      { op: 'edge' },
      { op: 'tick', ms: 100, spend: [], lost: false },
      { op: 'tick', ms: 100, spend: [['q', 'a', 1]], lost: false },
      { op: 'tick', ms: 100, spend: [], lost: false },
      { op: 'reset', key: 'a' },
      { op: 'tick', ms: 100, spend: [], lost: false },
      { op: 'tick', ms: 100, spend: [], lost: false },
      { op: 'round' },
    ])
  })

  it('keeps a key leased on its own, waiting for its lease of the window whose share came ahead, when keys are evicted (found by the model: 13 of 12)', () => {
    // q, cut off from the coordinator, goes into window 1 on its share sent ahead; b is leased
    // on its own (r spends it) and q tracks two keys at most: b, waiting for its lease of
    // window 1, must not be forgotten for c, or q would spend b of its share there.
    run([
      { op: 'join', p: 'q' },
      tick([]),
      { op: 'reset', key: 'b' },
      { op: 'advance', ms: 2000 },
      { op: 'reset', key: 'a' },
      { op: 'edge' },
      { op: 'tick', ms: 100, spend: [], lost: false },
      { op: 'restart' },
      { op: 'join', p: 'r' },
      { op: 'tick', ms: 100, spend: [], lost: false },
      { op: 'tick', ms: 100, spend: [['r', 'b', 1]], lost: false },
      { op: 'tick', ms: 100, spend: [], lost: false },
      { op: 'advance', ms: 7300 },
      { op: 'tick', ms: 100, spend: [], lost: false },
      { op: 'tick', ms: 100, spend: [['r', 'b', 2]], lost: false },
      { op: 'spend', p: 'q', key: 'a', n: 1, ghost: false },
      { op: 'tick', ms: 100, spend: [], lost: false },
      { op: 'spend', p: 'r', key: 'b', n: 7, ghost: false },
      { op: 'spend', p: 'q', key: 'c', n: 1, ghost: false },
      { op: 'spend', p: 'q', key: 'b', n: 4, ghost: false },
    ])
  })

  it('gives back a share of the next window sent ahead when its holder closes before that window, having spent none of it (#41)', () => {
    // p and q hold a third of every key each, and the same of window 1 sent ahead; q closes
    // cleanly before the edge, saying what it spent of window 0: its share of window 1 is free
    // there, and p grows to half (one holder, and room for one more).
    const w = run([
      { op: 'join', p: 'p' },
      { op: 'join', p: 'q' },
      tick([]),
      { op: 'advance', ms: windowMs - 700 - 200 },
      tick([['c', 2]]),
      { op: 'edge' },
      { op: 'deliver', p: 'p', ackLost: false },
      { op: 'deliver', p: 'q', ackLost: false },
      { op: 'release', p: 'q' },
      { op: 'advance', ms: 600 },
      tick([]),
      tick([]),
      tick([]),
    ])
    const p = w.processes.get('p')!.family
    expect(p.leaseOf('c')).toMatchObject({ source: 'default', window: 1 })
    expect(p.leaseOf('c').capacity).toBe(15)
  })

  it('never takes a share back within its window: a holder alone holds half of every key, and the holders that join share what is left', () => {
    // p spends key c slowly, never fast enough to report it: the coordinator never hears of c.
    const slowly: Step[] = Array.from({ length: 12 }, (): Step[] => [
      { op: 'spend', p: 'p', key: 'c', n: 1, ghost: false },
      tick([]),
    ]).flat()
    const spend = (p: Id, n: number): Step => ({ op: 'spend', p, key: 'c', n, ghost: false })
    const w = run([
      { op: 'join', p: 'p' },
      tick([]),
      ...slowly,
      tick([]),
      tick([]),
      { op: 'join', p: 'q' },
      { op: 'join', p: 'r' },
      ...Array.from({ length: 5 }, () => tick([])),
      // r is replaced by a new process under its id (the old one's share stays spent), which
      // takes what the shares left.
      { op: 'crash', p: 'r' },
      { op: 'join', p: 'r' },
      ...Array.from({ length: 5 }, () => tick([])),
      // q and r spend c as far as they are let: had p's share been cut back, they would be let
      // spend what p spent of it.
      spend('q', 10),
      spend('r', 10),
      ...Array.from({ length: 10 }, () => tick([['c', 10]])),
    ])
    expect(w.admitted.get('c@0')).toBeLessThanOrEqual(budget)
    // p holds 1/2 (one holder, and room for one more); q and r took 1/4 each (three, and one
    // more); r's new process got nothing: the old one's quarter stays spent.
    expect(w.processes.get('p')!.family.leaseOf('a')).toMatchObject({ capacity: 15 })
    expect(w.processes.get('q')!.family.leaseOf('a')).toMatchObject({ capacity: 7 })
    expect(w.processes.get('r')!.family.leaseOf('a')).toMatchObject({ capacity: 0 })
  })

  it('spends a key leased before any family lease came as a budget, not as a rate (found by the model: 13 of 12)', () => {
    // r joins as q spends key b, its first family lease is lost, and b goes hot: r's first
    // lease is b's own. Cut off by a coordinator restart, r must spend b's lease once.
    const steps = JSON.parse(
      '[{"op":"join","p":"q"},{"op":"tick","ms":200,"spend":[],"lost":false},{"op":"join","p":"r"},{"op":"round"},' +
        '{"op":"tick","ms":200,"spend":[["q","b",3]],"lost":false},{"op":"tick","ms":100,"spend":[],"lost":false},' +
        '{"op":"tick","ms":200,"spend":[],"lost":false},{"op":"advance","ms":50},{"op":"tick","ms":200,"spend":[],"lost":false},' +
        '{"op":"tick","ms":100,"spend":[],"lost":false},{"op":"advance","ms":50},{"op":"restart"},' +
        '{"op":"tick","ms":200,"spend":[],"lost":false},{"op":"tick","ms":200,"spend":[["r","b",1]],"lost":false},' +
        '{"op":"tick","ms":200,"spend":[],"lost":false},{"op":"advance","ms":300},{"op":"tick","ms":200,"spend":[],"lost":false},' +
        '{"op":"tick","ms":100,"spend":[["q","b",2]],"lost":false},{"op":"tick","ms":200,"spend":[["q","b",6]],"lost":false},' +
        '{"op":"spend","p":"r","key":"b","n":1,"ghost":false}]',
    ) as Step[]
    const w = run(steps)
    expect(w.processes.get('r')!.family.leaseOf('b')).toMatchObject({ source: 'key' })
  })

  it('sends a holder its key leases again with its family lease on a new connection (found by the model: 13 of 12)', () => {
    // p joins while b is hot (its batch, with b's lease of 1, is lost in a coordinator restart
    // that restores b's entry as acknowledged); back on a new connection, p's family lease must
    // bring b's lease with it, or p takes its default share of b (4) where 1 is counted.
    const w = run([
      { op: 'join', p: 'q' },
      tick([]),
      { op: 'tick', ms: 100, spend: [['q', 'b', 2]], lost: false },
      { op: 'tick', ms: 100, spend: [], lost: false },
      { op: 'join', p: 'p' },
      { op: 'round' },
      { op: 'restart' },
      { op: 'join', p: 'p' },
      { op: 'tick', ms: 100, spend: [], lost: false },
      { op: 'tick', ms: 100, spend: [['p', 'b', 2]], lost: false },
      { op: 'spend', p: 'q', key: 'b', n: 8, ghost: false },
      { op: 'spend', p: 'p', key: 'b', n: 1, ghost: false },
    ])
    expect(w.processes.get('p')!.family.leaseOf('b').source).toBe('key')
  })

  it("sends a key's lease with a holder's first family lease even when a restored pool took it for acknowledged (found by the model: 13 of 12)", () => {
    // q and r hold the family, disconnected through a coordinator restart; p joins. Just past a
    // window's edge (q's and r's shares of the window before still held), b is reset, so made
    // hot: q and r are sent b's lease of 0, which never reaches them, and the coordinator
    // restarts again, restoring that lease as acknowledged (and forgetting q's family lease).
    // q comes back: its first family lease of the window must carry b's lease of 0, or q takes
    // its default share of b (4) where 0 is counted, and p is moved all of b's 12.
    const steps = JSON.parse(
      '[{"op":"join","p":"r"},{"op":"tick","ms":200,"spend":[],"lost":false},' +
        '{"op":"tick","ms":100,"spend":[],"lost":false},{"op":"advance","ms":7000},{"op":"tick","ms":100,"spend":[],"lost":false},' +
        '{"op":"advance","ms":7000},{"op":"join","p":"q"},{"op":"advance","ms":7000},{"op":"advance","ms":300},' +
        '{"op":"tick","ms":200,"spend":[],"lost":false},{"op":"advance","ms":300},{"op":"tick","ms":100,"spend":[],"lost":false},' +
        '{"op":"tick","ms":200,"spend":[],"lost":false},{"op":"advance","ms":7000},{"op":"restart"},{"op":"advance","ms":50},' +
        '{"op":"advance","ms":50},{"op":"join","p":"p"},{"op":"tick","ms":200,"spend":[],"lost":false},' +
        '{"op":"tick","ms":200,"spend":[],"lost":false},{"op":"tick","ms":100,"spend":[],"lost":false},' +
        '{"op":"tick","ms":200,"spend":[],"lost":false},{"op":"reset","key":"b"},{"op":"restart"},' +
        '{"op":"tick","ms":200,"spend":[],"lost":false},{"op":"join","p":"q"},{"op":"join","p":"p"},' +
        '{"op":"tick","ms":100,"spend":[["p","b",3]],"lost":false},{"op":"tick","ms":100,"spend":[],"lost":false},' +
        '{"op":"tick","ms":100,"spend":[["p","b",4]],"lost":false},{"op":"tick","ms":100,"spend":[["p","b",5]],"lost":false}]',
    ) as Step[]
    const w = run([...steps, { op: 'spend', p: 'q', key: 'b', n: 4, ghost: false }])
    expect(w.processes.get('q')!.family.leaseOf('b')).toMatchObject({ source: 'key' })
    expect(w.admitted.get('b@3')).toBeLessThanOrEqual(12)
  })

  /** r alone for three refresh periods, then q joins. */
  const rThenQ: Step[] = [
    { op: 'join', p: 'r' },
    tick([]),
    tick([]),
    tick([]),
    { op: 'join', p: 'q' },
    tick([]),
    tick([]),
  ]
  /** r alone, then q joins; r spends 5 of b's 12 and closes, saying so. */
  const rClosesHavingSpentB: Step[] = [
    ...rThenQ,
    { op: 'spend', p: 'r', key: 'b', n: 5, ghost: false },
    { op: 'release', p: 'r' },
  ]

  it('hands a released share on with what it spent, even when the lease that carried it is lost (found by the model: 13 of 12)', () => {
    // r alone holds half of every key (a third in the family's first two refresh periods, then
    // grown); q joins (a third); r spends 5 of b's 12 and closes,
    // saying so. No newcomer comes, so after three refresh periods a round hands r's half to
    // q, but that lease comes too late and is lost (with its connection: q connects again at
    // once). q spends b as far as it is let: b goes hot while the handover is pending (its
    // lease must not give q r's half of b whole). Then q comes back on a new connection: the
    // family lease that goes again must still say b's 5 are spent.
    const steps: Step[] = [
      ...rClosesHavingSpentB,
      { op: 'advance', ms: 700 },
      { op: 'round' },
      ...Array.from({ length: 6 }, () => tick([['b', 4]])),
      { op: 'disconnect', p: 'q' },
      { op: 'join', p: 'q' },
      { op: 'deliver', p: 'q', ackLost: false },
      ...Array.from({ length: 6 }, () => tick([['b', 4]])),
    ]
    const w = run(steps)
    // q holds r's half and its own third (five sixths of every key).
    expect(w.processes.get('q')!.family.leaseOf('a')).toMatchObject({ capacity: 25 })
    expect(w.admitted.get('b@0')).toBeLessThanOrEqual(12)
    // 10 were admitted while the lost lease left q's connection up (the model's messages were
    // lost one at a time until 2026-12-06); with the connection lost too, q spends 4 of b and
    // then holds a lease of 6 of it that it cannot spend: b went hot after r had closed, and r's
    // share, set aside for q, was seeded with what r spent of b (hot-keys.ts, seedKey), which
    // q's use counts too once it has heard it was handed (`charged`): r's 5 count twice, and q's
    // target never fits in b's 12. Three units of b lost to the handover. Tried (2026-12-06):
    // dropping r's entry of b once q acknowledged the handover loses the 5 where q's lease of b
    // is below them (31 of 30, found by the model); waiting for q to acknowledge a later lease
    // of b deadlocks (q counts 9 used under a lease of 6, and acknowledges no lease its use does
    // not fit in). What would do: the pool counting a quota key's reported use as committed.
    expect(w.admitted.get('b@0')).toBeGreaterThanOrEqual(9)
  })

  it('keeps what a closed process spent of a key leased to it on its own, once its heir has what it spent of the rest', () => {
    // r spends a fast, so a goes hot and r is leased a on its own; r closes having spent of a
    // and of b (b by its default part, so its release names b only), and q is handed r's
    // share. Once q has acknowledged, r's own lease of a stays: what r spent of a counts to the
    // window's end.
    const steps: Step[] = [
      ...rThenQ,
      ...Array.from({ length: 4 }, (): Step[] => [
        { op: 'spend', p: 'r', key: 'a', n: 3, ghost: false },
        tick([]),
      ]).flat(),
      { op: 'spend', p: 'r', key: 'b', n: 5, ghost: false },
      { op: 'release', p: 'r' },
      ...Array.from({ length: 20 }, () =>
        tick([
          ['a', 4],
          ['b', 4],
        ]),
      ),
    ]
    const w = run(steps)
    // Dropping r's entries once q had acknowledged (all of them, not only those seeded from
    // its share: tried 2026-12-06) let q be leased what r had spent of a: 33 of 30 (the model's
    // check of every step fails first).
    expect(w.admitted.get('a@0')).toBeLessThanOrEqual(budget)
    // Both keys whole, as one central counter admits.
    expect(w.admitted.get('a@0')).toBe(budget)
    expect(w.admitted.get('b@0')).toBe(12)
  })

  it("seeds a closed process's share with what it spent of a key that goes hot, not its whole part", () => {
    // As above, but q spends b at once after r closes, b going hot as r's share is handed on:
    // r's entry of b holds what r spent of it at most, and q spends the 7 that are left.
    const w = run([...rClosesHavingSpentB, ...Array.from({ length: 14 }, () => tick([['b', 4]]))])
    expect(w.admitted.get('b@0')).toBeLessThanOrEqual(12)
    // All of b, as one central counter admits (11 when r's entry was seeded its whole half).
    expect(w.admitted.get('b@0')).toBe(12)
  })

  it('resets a spent key: its whole budget again within a few refresh periods, never more', () => {
    // Every process spends key a as far as it is let: the whole budget goes.
    const spent: Step[] = [...joinAll, tick([])]
    for (let i = 0; i < 20; i++) spent.push(tick([['a', 2]]))
    const before = run(spent)
    expect(before.admitted.get('a@0')).toBe(budget)
    // Reset, and every process goes on asking: the budget again (a little may be stranded in
    // standing blocks of those that ask less), never more than one.
    const steps: Step[] = [...spent, { op: 'reset', key: 'a' }]
    for (let i = 0; i < 25; i++) steps.push(tick([['a', 2]]))
    const w = run(steps)
    expect(w.givenBack.get('a@0')).toBe(budget)
    expect(w.admitted.get('a@0')).toBeGreaterThanOrEqual(2 * budget - 3)
    expect(w.admitted.get('a@0')).toBeLessThanOrEqual(2 * budget)
    // A key spent slowly at two processes (never fast enough to be reported): on the default
    // shares, the coordinator has not heard of it. The reset makes it hot and takes effect once
    // the holders said what they spent.
    const cold: Step[] = [...joinAll, tick([])]
    for (let i = 0; i < 4; i++)
      cold.push({ op: 'spend', p: 'q', key: 'c', n: 1, ghost: false }, tick([]))
    cold.push({ op: 'spend', p: 'p', key: 'c', n: 1, ghost: false }, tick([]))
    const unheard = run(cold)
    expect(unheard.pool.keyLookup('k', 'c', unheard.nowMs)).toMatchObject({
      leasedOnItsOwn: false,
    })
    cold.push({ op: 'reset', key: 'c' }, { op: 'round' })
    for (const p of ids) cold.push({ op: 'deliver', p, ackLost: false })
    const asked = run(cold)
    expect(asked.pool.keyLookup('k', 'c', asked.nowMs)).toMatchObject({
      leasedOnItsOwn: true,
      reset: { pending: true, givenBack: 0 },
    })
    for (let i = 0; i < 5; i++) cold.push(tick([]))
    const c = run(cold)
    expect(c.givenBack.get('c@0')).toBe(5)
    expect(c.pool.keyLookup('k', 'c', c.nowMs)).toMatchObject({
      leasedOnItsOwn: true,
      reset: { pending: false, givenBack: 5 },
    })
  })

  it("gives back on a reset a unit the coordinator's dead part spent ahead of the window, counted in it: one whole budget after, never more (found by the model: 2 given back of 1)", () => {
    // The coordinator's part (x) alone holds the family (its checks before it joined, refused,
    // made key a one it asks for). At 9,800 ms, with the next window's
    // parts sent ahead, it spends a unit of both windows (quota-keys.ts, `straddle`), reserved in
    // both; at 10,000 ms one more. It dies with the coordinator; its heir is handed its share
    // with both units of window 1 spent (central-spend.ts says what it reserved, not which
    // units were spent ahead), and a reset gives both back. Both are counted in window 1's part,
    // so from the reset on the key admits one whole budget: 31 in window 1, never 32.
    const tickOf = (ms: number, spend: [Id, Key, number][], lost = false): Step => ({
      op: 'tick',
      ms,
      spend,
      lost,
    })
    const steps: Step[] = [
      { op: 'advance', ms: 200 },
      tickOf(200, [[centralId, 'a', 1]]),
      { op: 'advance', ms: 400 },
      tickOf(200, [[centralId, 'a', 1]]),
      { op: 'advance', ms: 8050 },
      tickOf(200, [[centralId, 'a', 1]]),
      { op: 'join', p: centralId },
      { op: 'advance', ms: 100 },
      tickOf(200, [[centralId, 'a', 1]], true),
      { op: 'edge' },
      { op: 'advance', ms: 50 },
      tickOf(200, []),
      { op: 'spend', p: centralId, key: 'a', n: 1, ghost: false },
      tickOf(200, [[centralId, 'a', 1]]),
      { op: 'restart' },
      { op: 'join', p: centralId },
      { op: 'restart' },
      { op: 'reset', key: 'a' },
      { op: 'round' },
    ]
    const w = run(steps, oneHolder)
    expect([...w.admitted]).toEqual([
      ['a@0', 1],
      ['a@1', 1],
    ])
    expect(w.spentAhead.get('a@1')).toBe(1)
    expect(w.resetSaid.get('a@1')).toBe(2)
    const all: [Id, Key, number][] = allIds.map((i) => [i, 'a', 15])
    const more: Step[] = [...joinAll, { op: 'join', p: centralId }]
    for (let i = 0; i < 12; i++) more.push(tickOf(200, all))
    const after = run([...steps, ...more], oneHolder)
    expect(after.nowMs).toBeLessThan(2 * windowMs)
    expect(after.admitted.get('a@1')).toBe(budget + 1)
  })

  it('counts a share handed on once, however often its lease is sent, so a reset gives back no more than was spent (found by the model: 2 given back of 1)', () => {
    // q spends 1 of a and closes, saying so; p comes and is handed q's share with a's 1 spent,
    // in a lease sent again before p acknowledged it. Reset: what p reports used of a (q's 1)
    // is given back, once.
    const w = run([
      { op: 'join', p: 'q' },
      tick([]),
      { op: 'spend', p: 'q', key: 'a', n: 1, ghost: false },
      { op: 'report', p: 'q' },
      { op: 'release', p: 'q' },
      { op: 'join', p: 'p' },
      { op: 'tick', ms: 100, spend: [], lost: false },
      { op: 'reset', key: 'a' },
      { op: 'tick', ms: 100, spend: [], lost: false },
      { op: 'spend', p: 'p', key: 'a', n: 1, ghost: false },
      ...Array.from({ length: 5 }, () => tick([])),
    ])
    expect(w.resetSaid.get('a@0') ?? 0).toBeLessThanOrEqual(1)
    // The same across a coordinator restart, the reset asked before anyone is back: what the
    // heir was handed is in the ledger with its count (found by the model: 2 given back of 1).
    const restarted = run([
      { op: 'join', p: 'q' },
      { op: 'join', p: 'r' },
      tick([]),
      { op: 'tick', ms: 100, spend: [['q', 'a', 1]], lost: false },
      { op: 'report', p: 'q' },
      { op: 'release', p: 'q' },
      { op: 'advance', ms: 2000 },
      { op: 'tick', ms: 100, spend: [], lost: false },
      { op: 'tick', ms: 100, spend: [], lost: false },
      { op: 'restart' },
      { op: 'reset', key: 'a' },
      { op: 'round' },
    ])
    expect(restarted.resetSaid.get('a@0') ?? 0).toBeLessThanOrEqual(1)
    // And when the heir closes too, saying what it used of the key (the handed unit with it).
    const closed = run([
      { op: 'join', p: 'r' },
      tick([]),
      { op: 'spend', p: 'r', key: 'a', n: 1, ghost: false },
      { op: 'join', p: 'q' },
      { op: 'report', p: 'r' },
      { op: 'release', p: 'r' },
      { op: 'tick', ms: 100, spend: [], lost: false },
      { op: 'release', p: 'q' },
      { op: 'reset', key: 'a' },
      { op: 'tick', ms: 100, spend: [], lost: false },
      { op: 'advance', ms: 50 },
    ])
    expect(closed.resetSaid.get('a@0') ?? 0).toBeLessThanOrEqual(1)
    // And when the heir crashes and a new process takes its id (its entries set aside).
    const crashed = run([
      { op: 'join', p: 'q' },
      tick([]),
      { op: 'spend', p: 'q', key: 'a', n: 1, ghost: false },
      { op: 'join', p: 'p' },
      { op: 'report', p: 'q' },
      { op: 'release', p: 'q' },
      { op: 'tick', ms: 100, spend: [], lost: false },
      { op: 'tick', ms: 100, spend: [], lost: false },
      { op: 'crash', p: 'p' },
      { op: 'join', p: 'p' },
      { op: 'round' },
      { op: 'deliver', p: 'p', ackLost: false },
      { op: 'reset', key: 'a' },
      { op: 'tick', ms: 100, spend: [], lost: false },
    ])
    expect(crashed.resetSaid.get('a@0') ?? 0).toBeLessThanOrEqual(1)
  })

  it('counts a handover once in the client, however many leases carry it', () => {
    const family = new KeyedFamily(
      'k',
      resolveKeyedOptions('k', {}),
      new ManualClock(),
      new ManualClock(),
      owner,
    )
    const lease = (id: string) => ({
      resource: FAMILY,
      kind: 'quota' as const,
      capacity: 0.5,
      burst: 0.5,
      ttlMs: 1000,
      refreshMs: 200,
      safeCapacity: 0,
      safeHoldMs: 0,
      window: { index: 0, lengthMs: windowMs, endsInMs: windowMs, quota: 1 },
      family: { kind: 'quota' as const, capacity: budget, burst: budget },
      inherit: { window: 0, keys: [['a', 4]] as [string, number][], id },
    })
    family.applyFamilyLease(lease('h1'))
    family.applyFamilyLease(lease('h1'))
    // Half of a's 30 is 15; the leaver's 4, counted once, leave 11.
    let admitted = 0
    while (family.tryAcquire('a')) admitted++
    expect(admitted).toBe(11)
    // Another handover (another id) counts too.
    family.applyFamilyLease(lease('h2'))
    expect(family.tryAcquire('c')).toBe(true)
    let c = 1
    while (family.tryAcquire('c')) c++
    expect(c).toBe(15)
  })

  it('a key leased here unasked (it went hot elsewhere) is reported at once with what was spent of it, even nothing', () => {
    let early = 0
    const clock = new ManualClock()
    const family = new KeyedFamily('k', resolveKeyedOptions('k', {}), clock, clock, {
      requestEarlyReport: () => void early++,
      drained: () => undefined,
    })
    const window = { index: 0, lengthMs: windowMs, endsInMs: windowMs, quota: budget }
    const grant = (resource: string, capacity: number) => ({
      resource,
      kind: 'quota' as const,
      capacity,
      burst: capacity,
      ttlMs: 1000,
      refreshMs: 200,
      safeCapacity: 0,
      safeHoldMs: 0,
      window,
      ...(resource === FAMILY
        ? { family: { kind: 'quota' as const, capacity: budget, burst: budget } }
        : {}),
    })
    family.applyFamilyLease(grant(FAMILY, 0.25))
    for (let i = 0; i < 3; i++) expect(family.tryAcquire('a')).toBe(true)
    family.takeReport()
    // a and b go hot elsewhere: this process is seeded with its share of each, unasked.
    family.applyKeyLease('a', grant('k/a', 7))
    family.applyKeyLease('b', grant('k/b', 7))
    expect(early).toBeGreaterThan(0)
    expect(family.takeEarlyReportWish()).toBe(true)
    expect(family.takeEarlyReportWish()).toBe(false)
    const report = family.takeReport()
    expect(report).toContainEqual({ resource: 'k/a', wants: 0, used: 3, window: 0 })
    expect(report).toContainEqual({ resource: 'k/b', wants: 0, used: 0, window: 0 })
    // Said once: an idle key that spent nothing is not reported again.
    clock.advance(1000)
    expect(family.takeReport().map((e) => e.resource)).not.toContain('k/b')
  })

  it('sends a share renewed at the edge with the hot keys when it is the first lease of its window the holder hears (found by the model: 13 of 12)', () => {
    const spend = (p: Id, key: Key, n: number): Step => ({ op: 'spend', p, key, n, ghost: false })
    const steps: Step[] = [
      { op: 'join', p: 'p' },
      tick([]),
      { op: 'advance', ms: 2000 },
      { op: 'join', p: 'q' },
      { op: 'advance', ms: 2000 },
      { op: 'tick', ms: 100, spend: [], lost: false },
      // b goes hot at p: each holder gets a lease of b of window 0 (q: 4 of its default share).
      spend('p', 'b', 1),
      { op: 'report', p: 'p' },
      { op: 'tick', ms: 100, spend: [], lost: false },
      // The renewal sends each holder its share of window 1 ahead; q's is lost (late).
      { op: 'edge' },
      { op: 'advance', ms: 7000 },
      { op: 'report', p: 'q' },
      // In window 1, q's block ahead is its lease of it (promoted), renewed now: q's first
      // lease of window 1, which must carry b's lease of 0 (b leased on its own in window 1).
      { op: 'edge' },
      { op: 'tick', ms: 100, spend: [], lost: false },
      // p holds all 12 of b in window 1 and spends 9; q would take a default share of 4.
      { op: 'tick', ms: 100, spend: [['p', 'b', 9]], lost: false },
      spend('q', 'b', 4),
      { op: 'deliver', p: 'p', ackLost: false },
    ]
    const w = run(steps)
    expect(w.admitted.get('b@1')).toBe(9)
  })

  it("hands the coordinator's part's share on through a restart less what it reserved, read back from the ledger's shards", () => {
    const x = (spend: number): Step => ({
      op: 'tick',
      ms: 200,
      spend: [[centralId, 'c', spend]],
      lost: false,
    })
    const w = run(
      [
        { op: 'join', p: centralId },
        ...joinAll,
        tick([]),
        tick([]),
        x(0),
        x(10),
        x(10),
        { op: 'restart' },
        { op: 'join', p: centralId },
        ...joinAll,
        x(0),
        x(0),
        x(15),
        x(15),
        x(15),
        tick([['c', 10]]),
      ],
      oneHolder,
    )
    // The part spent 15 of c before the restart (all its share let it), and the new one more
    // after: the dead part's share was handed on less what it reserved (with none of it handed
    // on, 15 in all; handed on as unspent, with the shards never written, 31 of 30: the check).
    expect(w.admitted.get('c@0')).toBeGreaterThan(15)
    expect(w.ledger.entries().some((e) => e.resource.startsWith('\u0000reserved'))).toBe(true)
  })

  it('never admits more of a key in a window than its budget, through crashes, releases, restarts, lost acks and window ends', () => {
    fc.assert(
      fc.property(
        fc.subarray([...joinAll], { minLength: 1 }),
        fc.array(step, { minLength: 1, maxLength: 150, size: 'max' }),
        (joins, steps) => {
          run([...joins, tick([]), ...steps])
        },
      ),
      { numRuns: fc.readConfigureGlobal().numRuns ?? 100 },
    )
  })

  it("never admits more of a key in a window than its budget with the coordinator's part holding the default share, through its deaths and takeovers (#41)", () => {
    // One default holder: the coordinator's part (x) holds a default share for the others once
    // it holds the family, and its spending is reserved before it counts; a coordinator
    // restart, or its failure ('crash' of x), hands its share on less what it reserved
    // (server/pool/central-spend.ts).
    const central: Step = { op: 'join', p: centralId }
    // Beside the common steps, the part spending a key and a restart that finds it spent (what
    // the ledger must say of it): rare among the common steps alone (shards never written, so
    // the dead part's share handed on as unspent, passed 300 random runs of those).
    const spentThenRestart: fc.Arbitrary<Step[]> = fc
      .tuple(key, fc.integer({ min: 1, max: 15 }))
      .map(([k, n]): Step[] => [
        { op: 'tick', ms: 200, spend: [[centralId, k, n]], lost: false },
        { op: 'restart' },
        central,
        ...joinAll,
      ])
    const steps = fc
      .array(fc.oneof({ weight: 12, arbitrary: step.map((x) => [x]) }, spentThenRestart), {
        minLength: 1,
        maxLength: 120,
        size: 'max',
      })
      .map((groups) => groups.flat())
    fc.assert(
      fc.property(fc.subarray([...joinAll], { minLength: 1 }), steps, (joins, steps) => {
        run([central, ...joins, tick([]), ...steps], oneHolder)
      }),
      { numRuns: fc.readConfigureGlobal().numRuns ?? 100 },
    )
  })
})
