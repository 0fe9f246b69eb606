import { pino } from 'pino'
import { createClient } from '../../client/index.js'
import {
  ManualClock,
  SluiceError,
  kindTraits,
  seededRandom,
  systemClock,
  zipf,
} from '../../shared/index.js'
import { allocate } from '../allocation/index.js'
import {
  isFamilyShare,
  parseConfig,
  templateLearningMs,
  windowAt,
  type Config,
} from '../config/index.js'
import { DemandCurve } from './demand.js'
import { checkFamilies, FamilyTrack } from './families.js'
import { jain } from './metrics.js'
import { SimHost } from './network.js'
import type { Scenario } from './scenario.js'
import {
  checkExpectations,
  summariseQuota,
  summariseResource,
  type RunRecord,
  type SimEvent,
} from './summary.js'
import type { ResourceTrack, SampleRow, SimClient, SimResult, TrackedClient } from './types.js'

export type {
  ConvergenceRecord,
  SampleRow,
  SimResourceSummary,
  SimResult,
  TrackedClient,
} from './types.js'

const silent = pino({ level: 'silent' })

/** At most this many clients are charted. */
const maxTracked = 8

/**
 * Runs a scenario: the real coordinator (pool and allocation engine) and
 * real clients (`SluiceClient`, `Resource` and its token bucket) on one
 * manual clock, over a simulated network. Synchronous and deterministic:
 * the same scenario and seed give the same rows.
 */
export function simulate(scenario: Scenario): SimResult {
  return new SimRun(scenario).run()
}

/**
 * One run of a scenario, in steps: set up the coordinator, the resources and
 * the clients; schedule the scenario's events; tick (clients admit what their
 * demand asks); sample every `sampleMs`; summarise and check.
 */
export class SimRun {
  readonly #scenario: Scenario
  readonly #clock = new ManualClock(0)
  readonly #config: Config
  readonly #host: SimHost
  readonly #tickMs: number
  readonly #ticksPerSample: number
  readonly #tracks = new Map<string, ResourceTrack>()
  /** Keyed families, counted key by key (their processes are clients with `keys`). */
  readonly #families = new Map<string, FamilyTrack>()
  readonly #clients: SimClient[] = []
  /** Bumped whenever the true demands change, so ideals are recomputed only then. */
  #version = 0
  readonly #events: SimEvent[] = []
  /** [from, to] ms windows not held to the steady-state targets. */
  readonly #disturbed: [number, number][] = []
  #crashes = 0
  readonly #crashTimesMs: number[] = []
  readonly #restartsMs: number[] = []
  /** Per resource, per restart: when every client first held a lease of the new coordinator. */
  readonly #released = new Map<string, (number | undefined)[]>()
  /** ttl + grace of the longest lease plus two refresh periods: how long a disturbance lasts. */
  readonly #settleMs: number
  readonly #rows: SampleRow[] = []
  readonly #trackedClients: SimClient[] = []
  readonly #tracked: TrackedClient[]

  constructor(scenario: Scenario) {
    this.#scenario = scenario
    const random = seededRandom(scenario.seed)
    this.#config = parseConfig(
      {
        server: {
          limits: { heartbeatMs: scenario.coordinator.heartbeatMs, maxMessagesPerSec: 1000 },
        },
        resources: scenario.resources,
      },
      'scenario resources',
    )
    this.#host = new SimHost(
      this.#config,
      this.#clock,
      {
        ...scenario.network,
        heartbeatMs: scenario.coordinator.heartbeatMs,
        connectTimeoutMs: 2000,
        ledger: scenario.coordinator.ledger,
      },
      seededRandom(scenario.seed ^ 0x5eed),
      silent,
    )
    this.#tickMs = scenario.tickMs
    this.#ticksPerSample = Math.max(1, Math.round(scenario.sampleMs / this.#tickMs))
    const resources = this.#config.resources
    this.#settleMs =
      Math.max(...resources.map((r) => r.leaseTtlMs + r.graceMs)) +
      2 * Math.max(...resources.map((r) => r.refreshMs))
    this.#addClients(random)
    this.#scheduleEvents()
    this.#tracked = this.#chooseTracked()
  }

  /** Runs every tick, then summarises. */
  run(): SimResult {
    const wallStart = systemClock.now()
    const totalTicks = Math.ceil((this.#scenario.durationSec * 1000) / this.#tickMs)
    for (let tick = 0; tick < totalTicks; tick++) {
      this.#tick()
      if ((tick + 1) % this.#ticksPerSample === 0) this.#sample(tick)
    }
    for (const c of this.#clients) if (c.client !== undefined) this.#leave(c)
    this.#host.coordinator?.close()
    return this.#summarise(systemClock.now() - wallStart)
  }

  // ---- setup ----

  #track(id: string): ResourceTrack {
    let track = this.#tracks.get(id)
    if (track !== undefined) return track
    const s = this.#host.coordinator!.settingsFor(id)
    if (s === undefined)
      throw new SluiceError(
        'SLUICE_ERR_CLI_INPUT',
        `clients: no resource template matches ${JSON.stringify(id)}`,
      )
    track = {
      id,
      kind: s.kind,
      // Slots have no burst: Σ in flight must stay within capacity at every tick.
      burst: kindTraits[s.kind].refills ? s.burst : 0,
      refreshMs: s.refreshMs,
      surplus: s.surplus,
      algorithm: s.algorithm,
      capacity: s.capacity,
      admitted: [],
      capacityPerTick: [],
      demandPerTick: [],
      deviation: [],
      sampleEnforced: 0,
      sampleAdmitted: 0,
      sampleDemand: 0,
      idealVersion: -1,
      ideal: new Map(),
      ...(s.quotaWindow === undefined
        ? {}
        : { quota: { spec: s.quotaWindow, windows: new Map() } }),
    }
    this.#tracks.set(id, track)
    return track
  }

  #addClients(random: () => number): void {
    for (const group of this.#scenario.clients) {
      if (group.keys === undefined) this.#track(group.resource)
      else this.#family(group.resource, group.keys.count)
      for (let i = 0; i < group.count; i++) {
        const seed = Math.floor(random() * 2 ** 31)
        this.#clients.push({
          id: group.count === 1 ? group.id : `${group.id}-${i}`,
          resource: group.resource,
          weight: group.weight,
          failureMode: group.failureMode,
          joinMs: (group.joinSec + random() * group.joinSpreadSec) * 1000,
          leaveMs: group.leaveSec === undefined ? Infinity : group.leaveSec * 1000,
          curve: new DemandCurve(group.demand, seededRandom(seed)),
          seed,
          client: undefined,
          handle: undefined,
          family: undefined,
          draw:
            group.keys === undefined
              ? undefined
              : zipf(group.keys.count, group.keys.zipf, seededRandom(seed ^ 0x21bf)),
          demand: 0,
          carry: 0,
          held: 0,
          lastLeaseMs: -Infinity,
        })
      }
    }
  }

  /** The track of a keyed family (a rate family: its keys are what the bound is checked on). */
  #family(id: string, keys: number): FamilyTrack {
    const s = this.#host.coordinator!.settingsFor(id)
    const family = s?.family
    if (
      s === undefined ||
      !isFamilyShare(s) ||
      family === undefined ||
      !kindTraits[family.keyKind].refills ||
      kindTraits[family.keyKind].perWindow
    )
      throw new SluiceError(
        'SLUICE_ERR_CLI_INPUT',
        `clients with keys: ${JSON.stringify(id)} is not a keyed rate family (a template with keyed: true, kind: rate, matched as <prefix>/*)`,
      )
    let track = this.#families.get(id)
    if (track !== undefined && track.keys !== keys)
      throw new SluiceError(
        'SLUICE_ERR_CLI_INPUT',
        `clients of ${JSON.stringify(id)}: every group of a family asks for the same keys (keys.count ${track.keys} and ${keys})`,
      )
    if (track === undefined)
      this.#families.set(
        id,
        (track = new FamilyTrack(id, keys, family.keyCapacity, family.keyBurst)),
      )
    return track
  }

  /** Crashes, capacity changes and partitions on the clock; joins, leaves and steps as events. */
  #scheduleEvents(): void {
    const scenario = this.#scenario
    const clock = this.#clock
    const host = this.#host
    const maxRefreshMs = Math.max(...this.#config.resources.map((r) => r.refreshMs))
    // A coordinator that has just started learns before it grants: the start is disturbed too.
    const maxLearningMs = Math.max(...this.#config.resources.map(templateLearningMs))
    this.#disturbed.push([0, maxLearningMs + 2 * maxRefreshMs])
    for (const e of scenario.events) {
      const atMs = e.atSec * 1000
      if (e.type === 'crash') this.#crashAt(atMs)
      else if (e.type === 'capacity') {
        clock.setTimeout(() => {
          const next = structuredClone<Config>(host.config)
          for (const r of next.resources) if (r.match === e.resource) r.capacity = e.capacity
          host.applyConfig(next)
          const track = this.#tracks.get(e.resource)
          if (track !== undefined) track.capacity = e.capacity
          this.#version++
        }, atMs)
        this.#events.push({ atMs, name: `capacity ${e.capacity}`, resource: e.resource })
      } else {
        const untilMs = atMs + e.durationSec * 1000
        clock.setTimeout(() => {
          host.partition(
            this.#clients.filter((c) => c.id.startsWith(e.clients)).map((c) => c.id),
            untilMs,
          )
        }, atMs)
        this.#events.push({ atMs: untilMs, name: `partition of ${e.clients} healed` })
        this.#disturbed.push([atMs, untilMs + this.#settleMs])
      }
    }
    const meanGapSec = scenario.coordinator.meanTimeBetweenCrashesSec
    if (meanGapSec !== undefined) {
      const crashRandom = seededRandom(scenario.seed ^ 0xc4a5)
      for (let atMs = 0; ;) {
        atMs += -Math.log(1 - crashRandom()) * meanGapSec * 1000
        if (atMs >= scenario.durationSec * 1000) break
        this.#crashAt(atMs)
      }
    }
    for (const c of this.#clients) {
      this.#events.push({ atMs: c.joinMs, name: `join ${c.id}`, resource: c.resource })
      if (Number.isFinite(c.leaveMs))
        this.#events.push({ atMs: c.leaveMs, name: `leave ${c.id}`, resource: c.resource })
    }
    for (const group of scenario.clients) {
      if (group.demand.type !== 'steps') continue
      for (const [atSec] of group.demand.steps)
        if (atSec > 0)
          this.#events.push({
            atMs: atSec * 1000,
            name: `demand step of ${group.id}`,
            resource: group.resource,
          })
    }
  }

  #crashAt(atMs: number): void {
    const failoverMs = this.#scenario.coordinator.failoverMs
    this.#clock.setTimeout(() => {
      if (!this.#host.up) return
      this.#crashes++
      this.#crashTimesMs.push(this.#clock.now())
      this.#host.crash()
      this.#clock.setTimeout(() => {
        this.#host.restart()
        this.#restartsMs.push(this.#clock.now())
      }, failoverMs)
    }, atMs)
    const backMs = atMs + failoverMs
    this.#events.push({ atMs: backMs, name: 'failover' })
    this.#disturbed.push([atMs, backMs + this.#settleMs])
  }

  /** Charted clients: the first of each group, then the next of each, up to eight. */
  #chooseTracked(): TrackedClient[] {
    const limit = Math.min(maxTracked, this.#clients.filter((c) => c.draw === undefined).length)
    for (let round = 0; this.#trackedClients.length < limit; round++) {
      for (const group of this.#scenario.clients) {
        if (group.keys !== undefined) continue
        const members = this.#clients.filter(
          (c) => c.id === group.id || c.id.startsWith(`${group.id}-`),
        )
        if (members[round] !== undefined && this.#trackedClients.length < maxTracked)
          this.#trackedClients.push(members[round]!)
      }
    }
    return this.#trackedClients.map((c) => ({
      id: c.id,
      resource: c.resource,
      grants: [],
      ideals: [],
    }))
  }

  #join(c: SimClient): void {
    const client = createClient({
      url: 'ws://coordinator.sim/v1/connect',
      clientId: c.id,
      clock: this.#clock,
      random: seededRandom(c.seed ^ 0xbac0ff),
      backoffBaseMs: 100,
      backoffCapMs: 5000,
      socketFactory: () => this.#host.connect(c.id),
    })
    c.client = client
    client.on('error', () => undefined)
    c.demand = c.curve.at(this.#clock.now() / 1000)
    const family = this.#families.get(c.resource)
    if (family !== undefined) {
      c.family = client.keyed(family.prefix, { weight: c.weight })
      c.family.on('lease', () => (c.lastLeaseMs = this.#clock.now()))
      this.#version++
      return
    }
    const kind = this.#tracks.get(c.resource)?.kind
    c.handle = client.resource(c.resource, {
      wants: c.demand,
      weight: c.weight,
      failureMode: c.failureMode,
      ...(kind !== undefined && kindTraits[kind].perWindow ? { kind } : {}),
    })
    c.handle.on('lease', () => (c.lastLeaseMs = this.#clock.now()))
    this.#version++
  }

  #leave(c: SimClient): void {
    void c.client?.close()
    c.client = undefined
    c.handle = undefined
    c.family = undefined
    this.#version++
  }

  // ---- ticks ----

  /** One tick: clients join or leave, then each admits what its demand asks for. */
  #tick(): void {
    this.#clock.advance(this.#tickMs)
    const nowMs = this.#clock.now()
    for (const c of this.#clients) {
      if (c.client === undefined && nowMs >= c.joinMs && nowMs < c.leaveMs) this.#join(c)
      else if (c.client !== undefined && nowMs >= c.leaveMs) this.#leave(c)
      if (c.handle !== undefined) this.#admit(c, nowMs / 1000)
      else if (c.family !== undefined) this.#admitKeys(c, nowMs)
    }
    const steady = this.#steadyAt(nowMs)
    for (const family of this.#families.values()) if (steady) family.steadyTick(this.#tickMs)
    for (const track of this.#tracks.values()) this.#record(track)
    this.#watchRelease(nowMs)
  }

  /** After a restart: the first tick at which every client holds a lease the new coordinator sent. */
  #watchRelease(nowMs: number): void {
    const restartMs = this.#restartsMs.at(-1)
    if (restartMs === undefined) return
    const index = this.#restartsMs.length - 1
    for (const track of this.#tracks.values()) {
      let list = this.#released.get(track.id)
      if (list === undefined) this.#released.set(track.id, (list = []))
      if (list.length > index) continue
      const clients = this.#clients.filter((c) => c.resource === track.id && c.handle !== undefined)
      if (clients.every((c) => c.lastLeaseMs >= restartMs))
        list.push(nowMs - this.#crashTimesMs[index]!)
    }
  }

  #admit(c: SimClient, tSec: number): void {
    const r = c.handle!
    const demand = c.curve.at(tSec)
    if (demand !== c.demand) {
      c.demand = demand
      r.setWants(demand)
      this.#version++
    }
    const track = this.#tracks.get(c.resource)!
    if (kindTraits[track.kind].holdsInFlight) {
      // Work lasts one tick: last tick's slots come back, then as many as wanted are taken.
      if (c.held > 0) r.releaseSlots(c.held)
      const asked = Math.round(demand)
      c.held = Math.min(asked, r.remaining())
      if (c.held > 0) r.tryAcquire(c.held)
      track.sampleAdmitted += c.held
      track.sampleDemand += asked
      return
    }
    c.carry += (demand * this.#tickMs) / 1000
    const asked = Math.floor(c.carry)
    c.carry -= asked
    // What the check admits, not what `remaining` said it might.
    const fits = Math.min(asked, r.remaining())
    const admitted = fits > 0 && r.tryAcquire(fits) ? fits : 0
    track.sampleAdmitted += admitted
    track.sampleDemand += asked
    if (track.quota !== undefined) this.#countWindow(track.quota, admitted, asked)
  }

  /** A family's process: as many checks as its demand asks for this tick, each of a key drawn by Zipf. */
  #admitKeys(c: SimClient, nowMs: number): void {
    const family = this.#families.get(c.resource)!
    c.demand = c.curve.at(nowMs / 1000)
    c.carry += (c.demand * this.#tickMs) / 1000
    const steady = this.#steadyAt(nowMs)
    for (; c.carry >= 1; c.carry--) {
      const k = c.draw!()
      family.check(k, c.family!.tryAcquire(family.key(k)), nowMs, steady)
    }
  }

  /** Outside every failover, partition and start-up window. */
  #steadyAt(ms: number): boolean {
    return !this.#disturbed.some(([a, b]) => ms > a && ms <= b)
  }

  /** A quota's use, counted in the window the wall clock is in (as the coordinator's). */
  #countWindow(quota: NonNullable<ResourceTrack['quota']>, used: number, asked: number): void {
    const w = windowAt(quota.spec, this.#clock.wallNow())
    let use = quota.windows.get(w.index)
    if (use === undefined)
      quota.windows.set(
        w.index,
        (use = { index: w.index, startMs: w.startMs, endMs: w.endMs, used: 0, asked: 0 }),
      )
    use.used += used
    use.asked += asked
  }

  /** A resource's tick: its ideal shares, each client's distance from them, what was admitted. */
  #record(track: ResourceTrack): void {
    // The ideal: the engine's allocation over the true demands, recomputed when they change.
    if (track.idealVersion !== this.#version) {
      const active = this.#clients.filter((c) => c.resource === track.id && c.handle !== undefined)
      const result = allocate({
        capacity: track.capacity,
        algorithm: track.algorithm,
        surplus: track.surplus,
        clients: active.map((c) => ({ id: c.id, wants: c.demand, weight: c.weight })),
      })
      track.ideal = new Map(active.map((c, i) => [c.id, result.grants[i]!]))
      track.idealVersion = this.#version
    }
    // Each client's distance from its ideal, relative to the larger of its ideal and an equal
    // share (so a client whose ideal is near 0 is not held to a near-0 tolerance).
    const equalShare = track.capacity / Math.max(1, track.ideal.size)
    let deviation = 0
    let enforcedNow = 0
    for (const c of this.#clients) {
      if (c.resource !== track.id || c.handle === undefined) continue
      enforcedNow += c.handle.capacity
      const ideal = track.ideal.get(c.id) ?? 0
      // Slots are whole: a grant within one slot of a fractional ideal is as close as it gets.
      const gap = Math.abs(c.handle.capacity - ideal)
      const off =
        (kindTraits[track.kind].wholeUnits ? Math.max(0, gap - (1 - 1e-9)) : gap) /
        Math.max(ideal, equalShare, 1e-9)
      deviation = Math.max(deviation, off)
    }
    track.sampleEnforced = Math.max(track.sampleEnforced, enforcedNow)
    track.deviation.push(track.capacity > 0 ? deviation : 0)
    track.admitted.push(track.sampleAdmitted)
    track.demandPerTick.push(track.sampleDemand)
    // Rate: tokens per tick; concurrency: slots (admitted counts slots held during the tick).
    track.capacityPerTick.push(
      kindTraits[track.kind].refills ? (track.capacity * this.#tickMs) / 1000 : track.capacity,
    )
    track.sampleAdmitted = 0
    track.sampleDemand = 0
  }

  // ---- samples ----

  /** One CSV row per resource, and a point per charted client. */
  #sample(tick: number): void {
    const tSec = this.#clock.now() / 1000
    const ticks = this.#ticksPerSample
    for (const track of this.#tracks.values()) {
      const from = tick + 1 - ticks
      let admitted = 0
      let demand = 0
      for (let i = from; i <= tick; i++) {
        admitted += track.admitted[i]!
        demand += track.demandPerTick[i]!
      }
      // Rate: per second; concurrency: mean slots in flight over the sample.
      const seconds = kindTraits[track.kind].refills ? (ticks * this.#tickMs) / 1000 : ticks
      const enforced = track.sampleEnforced
      track.sampleEnforced = 0
      let count = 0
      const ratios: number[] = []
      for (const c of this.#clients) {
        if (c.resource !== track.id || c.handle === undefined) continue
        count++
        // Fairness of what each client can use: min(grant, demand) against min(ideal, demand).
        const ideal = Math.min(track.ideal.get(c.id) ?? 0, c.demand)
        if (ideal > 0) ratios.push(Math.min(c.handle.capacity, c.demand) / ideal)
      }
      this.#rows.push({
        tSec,
        resource: track.id,
        capacity: track.capacity,
        demand: demand / seconds,
        admittedRate: admitted / seconds,
        enforced,
        committed: this.#host.coordinator?.view.committed(track.id) ?? 0,
        jain: jain(ratios),
        maxDeviation: track.deviation[tick]!,
        clients: count,
      })
    }
    for (const [i, c] of this.#trackedClients.entries()) {
      this.#tracked[i]!.grants.push(c.handle?.capacity ?? 0)
      this.#tracked[i]!.ideals.push(
        c.handle === undefined ? 0 : (this.#tracks.get(c.resource)!.ideal.get(c.id) ?? 0),
      )
    }
  }

  // ---- summary ----

  #summarise(wallMs: number): SimResult {
    const tickMs = this.#tickMs
    const disturbed = this.#disturbed
    const record: RunRecord = {
      scenario: this.#scenario,
      tickMs,
      rows: this.#rows,
      events: [...this.#events].sort((a, b) => a.atMs - b.atMs),
      crashTimesMs: this.#crashTimesMs,
      steady: (tick) => {
        const ms = (tick + 1) * tickMs
        return !disturbed.some(([a, b]) => ms > a && ms <= b)
      },
      settleMs: this.#settleMs,
    }
    const resources = [...this.#tracks.values()].map((track) => {
      const released = this.#released.get(track.id) ?? []
      return {
        ...summariseResource(track, record),
        releasedSec: this.#crashTimesMs.map((_, i) =>
          released[i] === undefined ? undefined : released[i] / 1000,
        ),
        quota:
          track.quota === undefined
            ? undefined
            : // Windows are measured from the end of the first start's learning (a quota
              // learns for a whole window without a trusted ledger) to the end of the run.
              summariseQuota(track.quota.windows, track.capacity, [
                this.#clock.wallNow() - this.#clock.now() + (this.#disturbed[0]?.[1] ?? 0),
                this.#clock.wallNow(),
              ]),
      }
    })
    const families = [...this.#families.values()].map((f) =>
      f.summarise(
        this.#host.coordinator?.view.families(0).find((x) => x.id === f.id)?.hotKeys ?? 0,
      ),
    )
    return {
      scenario: this.#scenario,
      rows: this.#rows,
      tracked: this.#tracked,
      summary: {
        name: this.#scenario.name,
        simulatedSec: this.#scenario.durationSec,
        wallMs,
        clients: this.#clients.length,
        messages: this.#host.messages,
        lost: this.#host.lost,
        crashes: this.#crashes,
        resources,
        families,
        checks: [
          ...checkExpectations(this.#scenario.expect, resources),
          ...checkFamilies(this.#scenario.expect, families),
        ],
      },
    }
  }
}
