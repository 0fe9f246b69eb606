import { pino } from 'pino'
import { createClient, type Resource, type SluiceClient } from '../../client/index.js'
import { ManualClock, SluiceError, seededRandom, systemClock } from '../../shared/index.js'
import { allocate } from '../allocation/index.js'
import { parseConfig, type Config } from '../config/index.js'
import { DemandCurve } from './demand.js'
import { convergenceMs, episodes, jain, worstExcessOverBound, worstWindowRatio } from './metrics.js'
import { SimHost } from './network.js'
import type { Scenario } from './scenario.js'

/** One CSV row: one resource at one sample time. */
export interface SampleRow {
  readonly tSec: number
  readonly resource: string
  readonly capacity: number
  readonly demand: number
  readonly admittedRate: number
  /** Σ capacity the clients enforce, at its highest over the sample's ticks. */
  readonly enforced: number
  /** Σ committed at the coordinator (0 while it is down). */
  readonly committed: number
  readonly jain: number
  /** max over clients of |grant − ideal| ÷ max(ideal, capacity / clients). */
  readonly maxDeviation: number
  readonly clients: number
}

export interface ConvergenceRecord {
  readonly event: string
  readonly atSec: number
  /** In a failover, partition or start-up window: not held to the convergence target. */
  readonly disturbed: boolean
  /** undefined: not converged before the next event. */
  readonly ms: number | undefined
  readonly refreshes: number | undefined
}

export interface SimResourceSummary {
  readonly resource: string
  readonly refreshMs: number
  /** Mean admitted ÷ capacity over ticks where demand ≥ capacity. */
  readonly utilisation: number
  /** The same, outside failover and partition windows. */
  readonly utilisationSteady: number
  /** Worst admitted ÷ capacity over any 1 s window. */
  readonly worst1s: number
  readonly worst1sSteady: number
  /** Most admitted beyond ∫capacity + Σburst over any interval outside failovers and partitions (≤ 0: bound held). */
  readonly excessOverBoundSteady: number
  readonly excessOverBound: number
  /** 1 s samples above capacity (by more than 1%), grouped in runs. */
  readonly overCapacityEpisodes: number
  readonly overCapacityPeak: number
  readonly jainMean: number
  readonly jainMin: number
  readonly convergence: readonly ConvergenceRecord[]
  /**
   * After each crash: seconds until admitted is back to 98% of min(capacity, demand) for good
   * (within the failover's disturbed window; 0 when it never fell below).
   */
  readonly catchUpSec: readonly number[]
}

export interface TrackedClient {
  readonly id: string
  readonly resource: string
  readonly grants: number[]
  readonly ideals: number[]
}

export interface SimResult {
  readonly scenario: Scenario
  readonly rows: readonly SampleRow[]
  readonly tracked: readonly TrackedClient[]
  readonly summary: {
    readonly name: string
    readonly simulatedSec: number
    readonly wallMs: number
    readonly clients: number
    readonly messages: number
    /** Packets lost and resent. */
    readonly lost: number
    readonly crashes: number
    readonly resources: readonly SimResourceSummary[]
    readonly checks: readonly { name: string; ok: boolean; detail: string }[]
  }
}

interface SimClient {
  readonly id: string
  readonly resource: string
  readonly weight: number
  readonly failureMode: 'safe' | 'pessimistic' | 'optimistic'
  readonly joinMs: number
  readonly leaveMs: number
  readonly curve: DemandCurve
  readonly seed: number
  client: SluiceClient | undefined
  handle: Resource | undefined
  demand: number
  carry: number
  /** Concurrency: slots held since the last tick. */
  held: number
}

interface ResourceTrack {
  readonly id: string
  readonly kind: 'rate' | 'concurrency'
  readonly burst: number
  readonly refreshMs: number
  readonly surplus: Config['resources'][number]['surplus']
  readonly algorithm: Config['resources'][number]['algorithm']
  capacity: number
  readonly admitted: number[]
  readonly capacityPerTick: number[]
  readonly demandPerTick: number[]
  readonly deviation: number[]
  sampleEnforced: number
  sampleAdmitted: number
  sampleDemand: number
  idealVersion: number
  ideal: Map<string, number>
}

const silent = pino({ level: 'silent' })

/**
 * Runs a scenario: the real coordinator (pool and allocation engine) and
 * real clients (`SluiceClient`, `Resource` and its token bucket) on one
 * manual clock, over a simulated network. Synchronous and deterministic:
 * the same scenario and seed give the same rows.
 */
export function simulate(scenario: Scenario): SimResult {
  const wallStart = systemClock.now()
  const clock = new ManualClock(0)
  const random = seededRandom(scenario.seed)
  const config = parseConfig(
    {
      server: {
        limits: { heartbeatMs: scenario.coordinator.heartbeatMs, maxMessagesPerSec: 1000 },
      },
      resources: scenario.resources,
    },
    'scenario resources',
  )
  const host = new SimHost(
    config,
    clock,
    { ...scenario.network, heartbeatMs: scenario.coordinator.heartbeatMs, connectTimeoutMs: 2000 },
    seededRandom(scenario.seed ^ 0x5eed),
    silent,
  )
  const tickMs = scenario.tickMs
  const totalTicks = Math.ceil((scenario.durationSec * 1000) / tickMs)
  const ticksPerSample = Math.max(1, Math.round(scenario.sampleMs / tickMs))

  // ---- resources ----
  const tracks = new Map<string, ResourceTrack>()
  const trackFor = (id: string): ResourceTrack => {
    let t = tracks.get(id)
    if (t === undefined) {
      const s = host.coordinator!.settingsFor(id)
      if (s === undefined)
        throw new SluiceError(
          'SLUICE_ERR_CLI_INPUT',
          `clients: no resource template matches ${JSON.stringify(id)}`,
        )
      t = {
        id,
        kind: s.kind,
        // Slots have no burst: Σ in flight must stay within capacity at every tick.
        burst: s.kind === 'rate' ? s.burst : 0,
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
      }
      tracks.set(id, t)
    }
    return t
  }

  // ---- clients ----
  const clients: SimClient[] = []
  for (const group of scenario.clients) {
    trackFor(group.resource)
    for (let i = 0; i < group.count; i++) {
      const seed = Math.floor(random() * 2 ** 31)
      clients.push({
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
        demand: 0,
        carry: 0,
        held: 0,
      })
    }
  }
  let version = 0
  const join = (c: SimClient): void => {
    c.client = createClient({
      url: 'sim://coordinator',
      clientId: c.id,
      clock,
      random: seededRandom(c.seed ^ 0xbac0ff),
      backoffBaseMs: 100,
      backoffCapMs: 5000,
      socketFactory: () => host.connect(c.id),
    })
    c.client.on('error', () => undefined)
    c.demand = c.curve.at(clock.now() / 1000)
    c.handle = c.client.resource(c.resource, {
      wants: c.demand,
      weight: c.weight,
      failureMode: c.failureMode,
    })
    version++
  }
  const leave = (c: SimClient): void => {
    void c.client?.close()
    c.client = undefined
    c.handle = undefined
    version++
  }

  // ---- events ----
  const events: { atMs: number; name: string; resource?: string }[] = []
  const disturbed: [number, number][] = []
  let crashes = 0
  const crashTimes: number[] = []
  const maxLeaseMs = Math.max(...config.resources.map((r) => r.leaseTtlMs + r.graceMs))
  const maxRefreshMs = Math.max(...config.resources.map((r) => r.refreshMs))
  // A coordinator that has just started learns before it grants: the start is disturbed too.
  const maxLearningMs = Math.max(
    ...config.resources.map((r) => r.learningMs ?? r.leaseTtlMs + r.graceMs),
  )
  disturbed.push([0, maxLearningMs + 2 * maxRefreshMs])
  const crashAt = (atMs: number): void => {
    clock.setTimeout(() => {
      if (!host.up) return
      crashes++
      crashTimes.push(clock.now())
      host.crash()
      clock.setTimeout(() => host.restart(), scenario.coordinator.failoverMs)
    }, atMs)
    const backMs = atMs + scenario.coordinator.failoverMs
    events.push({ atMs: backMs, name: 'failover' })
    disturbed.push([atMs, backMs + maxLeaseMs + 2 * maxRefreshMs])
  }
  for (const e of scenario.events) {
    const atMs = e.atSec * 1000
    if (e.type === 'crash') crashAt(atMs)
    else if (e.type === 'capacity') {
      clock.setTimeout(() => {
        const next = structuredClone<Config>(host.config)
        for (const r of next.resources) if (r.match === e.resource) r.capacity = e.capacity
        host.applyConfig(next)
        const t = tracks.get(e.resource)
        if (t !== undefined) t.capacity = e.capacity
        version++
      }, atMs)
      events.push({ atMs, name: `capacity ${e.capacity}`, resource: e.resource })
    } else {
      const untilMs = atMs + e.durationSec * 1000
      clock.setTimeout(() => {
        host.partition(
          clients.filter((c) => c.id.startsWith(e.clients)).map((c) => c.id),
          untilMs,
        )
      }, atMs)
      events.push({ atMs: untilMs, name: `partition of ${e.clients} healed` })
      disturbed.push([atMs, untilMs + maxLeaseMs + 2 * maxRefreshMs])
    }
  }
  const mtbc = scenario.coordinator.meanTimeBetweenCrashesSec
  if (mtbc !== undefined) {
    const crashRandom = seededRandom(scenario.seed ^ 0xc4a5)
    for (let t = 0; ;) {
      t += -Math.log(1 - crashRandom()) * mtbc * 1000
      if (t >= scenario.durationSec * 1000) break
      crashAt(t)
    }
  }
  for (const c of clients) {
    events.push({ atMs: c.joinMs, name: `join ${c.id}`, resource: c.resource })
    if (Number.isFinite(c.leaveMs))
      events.push({ atMs: c.leaveMs, name: `leave ${c.id}`, resource: c.resource })
  }
  for (const group of scenario.clients) {
    if (group.demand.type !== 'steps') continue
    for (const [atSec] of group.demand.steps)
      if (atSec > 0)
        events.push({
          atMs: atSec * 1000,
          name: `demand step of ${group.id}`,
          resource: group.resource,
        })
  }

  // ---- the run ----
  const rows: SampleRow[] = []
  // Charted clients: the first of each group, then the next of each, up to eight.
  const trackedClients: SimClient[] = []
  for (let round = 0; trackedClients.length < Math.min(8, clients.length); round++) {
    for (const group of scenario.clients) {
      const members = clients.filter((c) => c.id === group.id || c.id.startsWith(`${group.id}-`))
      if (members[round] !== undefined && trackedClients.length < 8)
        trackedClients.push(members[round]!)
    }
  }
  const tracked: TrackedClient[] = trackedClients.map((c) => ({
    id: c.id,
    resource: c.resource,
    grants: [],
    ideals: [],
  }))
  for (let tick = 0; tick < totalTicks; tick++) {
    clock.advance(tickMs)
    const nowMs = clock.now()
    const tSec = nowMs / 1000
    for (const c of clients) {
      if (c.client === undefined && nowMs >= c.joinMs && nowMs < c.leaveMs) join(c)
      else if (c.client !== undefined && nowMs >= c.leaveMs) leave(c)
      const r = c.handle
      if (r === undefined) continue
      const d = c.curve.at(tSec)
      if (d !== c.demand) {
        c.demand = d
        r.setWants(d)
        version++
      }
      const t = tracks.get(c.resource)!
      if (t.kind === 'concurrency') {
        // Work lasts one tick: last tick's slots come back, then as many as wanted are taken.
        if (c.held > 0) r.releaseSlots(c.held)
        const asked = Math.round(d)
        c.held = Math.min(asked, r.remaining())
        if (c.held > 0) r.tryAcquire(c.held)
        t.sampleAdmitted += c.held
        t.sampleDemand += asked
        continue
      }
      c.carry += (d * tickMs) / 1000
      const asked = Math.floor(c.carry)
      c.carry -= asked
      const admitted = Math.min(asked, r.remaining())
      if (admitted > 0) r.tryAcquire(admitted)
      t.sampleAdmitted += admitted
      t.sampleDemand += asked
    }
    for (const t of tracks.values()) {
      // The ideal: the engine's allocation over the true demands, recomputed when they change.
      if (t.idealVersion !== version) {
        const active = clients.filter((c) => c.resource === t.id && c.handle !== undefined)
        const result = allocate({
          capacity: t.capacity,
          algorithm: t.algorithm,
          surplus: t.surplus,
          clients: active.map((c) => ({ id: c.id, wants: c.demand, weight: c.weight })),
        })
        t.ideal = new Map(active.map((c, i) => [c.id, result.grants[i]!]))
        t.idealVersion = version
      }
      // Each client's distance from its ideal, relative to the larger of its ideal and an equal
      // share (so a client whose ideal is near 0 is not held to a near-0 tolerance).
      const equalShare = t.capacity / Math.max(1, t.ideal.size)
      let deviation = 0
      let enforcedNow = 0
      for (const c of clients) {
        if (c.resource !== t.id || c.handle === undefined) continue
        enforcedNow += c.handle.capacity
        const ideal = t.ideal.get(c.id) ?? 0
        // Slots are whole: a grant within one slot of a fractional ideal is as close as it gets.
        const gap = Math.abs(c.handle.capacity - ideal)
        const off =
          (t.kind === 'concurrency' ? Math.max(0, gap - (1 - 1e-9)) : gap) /
          Math.max(ideal, equalShare, 1e-9)
        deviation = Math.max(deviation, off)
      }
      t.sampleEnforced = Math.max(t.sampleEnforced, enforcedNow)
      t.deviation.push(t.capacity > 0 ? deviation : 0)
      t.admitted.push(t.sampleAdmitted)
      t.demandPerTick.push(t.sampleDemand)
      // Rate: tokens per tick; concurrency: slots (admitted counts slots held during the tick).
      t.capacityPerTick.push(t.kind === 'rate' ? (t.capacity * tickMs) / 1000 : t.capacity)
      t.sampleAdmitted = 0
      t.sampleDemand = 0
    }
    if ((tick + 1) % ticksPerSample !== 0) continue
    for (const t of tracks.values()) {
      const from = tick + 1 - ticksPerSample
      let admitted = 0
      let demand = 0
      for (let i = from; i <= tick; i++) {
        admitted += t.admitted[i]!
        demand += t.demandPerTick[i]!
      }
      // Rate: per second; concurrency: mean slots in flight over the sample.
      const seconds = t.kind === 'rate' ? (ticksPerSample * tickMs) / 1000 : ticksPerSample
      const enforced = t.sampleEnforced
      t.sampleEnforced = 0
      let count = 0
      const ratios: number[] = []
      for (const c of clients) {
        if (c.resource !== t.id || c.handle === undefined) continue
        count++
        // Fairness of what each client can use: min(grant, demand) against min(ideal, demand).
        const ideal = Math.min(t.ideal.get(c.id) ?? 0, c.demand)
        if (ideal > 0) ratios.push(Math.min(c.handle.capacity, c.demand) / ideal)
      }
      rows.push({
        tSec,
        resource: t.id,
        capacity: t.capacity,
        demand: demand / seconds,
        admittedRate: admitted / seconds,
        enforced,
        committed: host.coordinator?.view.committed(t.id) ?? 0,
        jain: jain(ratios),
        maxDeviation: t.deviation[tick]!,
        clients: count,
      })
    }
    for (const [i, c] of trackedClients.entries()) {
      tracked[i]!.grants.push(c.handle?.capacity ?? 0)
      tracked[i]!.ideals.push(
        c.handle === undefined ? 0 : (tracks.get(c.resource)!.ideal.get(c.id) ?? 0),
      )
    }
  }
  for (const c of clients) if (c.client !== undefined) leave(c)
  host.coordinator?.close()

  // ---- summary ----
  const steady = (tick: number): boolean => {
    const ms = (tick + 1) * tickMs
    return !disturbed.some(([a, b]) => ms > a && ms <= b)
  }
  events.sort((a, b) => a.atMs - b.atMs)
  const summaries: SimResourceSummary[] = [...tracks.values()].map((t) => {
    // Over samples (1 s by default), not ticks: a bucket admits in bursts, and capping each
    // tick at its capacity would count a burst's tick as loss and its neighbour's as use.
    let util = 0
    let utilN = 0
    let utilSteady = 0
    let utilSteadyN = 0
    for (const r of rows) {
      if (r.resource !== t.id || r.capacity <= 0 || r.demand < r.capacity) continue
      const u = Math.min(r.admittedRate, r.capacity) / r.capacity
      util += u
      utilN++
      if (steady(Math.round((r.tSec * 1000) / tickMs) - 1)) {
        utilSteady += u
        utilSteadyN++
      }
    }
    const windowTicks = Math.max(1, Math.round(1000 / tickMs))
    const sampleRatios = rows
      .filter((r) => r.resource === t.id && r.capacity > 0)
      .map((r) => r.admittedRate / r.capacity)
    const over = episodes(sampleRatios, 1.01)
    const jains = rows.filter((r) => r.resource === t.id).map((r) => r.jain)
    // Convergence: every client within 2% of its ideal; measured at tick resolution.
    const tickTimes = t.deviation.map((_, i) => (i + 1) * tickMs)
    const converged = t.deviation.map((d) => d <= 0.02)
    const relevant = events.filter((e) => e.resource === undefined || e.resource === t.id)
    const convergence: ConvergenceRecord[] = []
    for (const [i, e] of relevant.entries()) {
      // Events closer together than a tick are one event.
      const next = relevant.slice(i + 1).find((n) => n.atMs > e.atMs + tickMs)
      if (relevant[i + 1] !== undefined && relevant[i + 1]!.atMs <= e.atMs + tickMs) continue
      const ms = convergenceMs(tickTimes, converged, e.atMs, next?.atMs ?? Infinity)
      convergence.push({
        event: e.name,
        atSec: e.atMs / 1000,
        disturbed: !steady(Math.round(e.atMs / tickMs)),
        ms,
        refreshes: ms === undefined ? undefined : ms / t.refreshMs,
      })
    }
    const catchUpSec: number[] = []
    const resourceRows = rows.filter((r) => r.resource === t.id)
    // Catch-up: from the crash to the end of the last sample, within the disturbed window that
    // follows it, that admitted less than 98% of min(capacity, demand); 0 if none did.
    for (const crashMs of crashTimes) {
      const endMs = crashMs + scenario.coordinator.failoverMs + maxLeaseMs + 2 * maxRefreshMs
      let lastShortSec: number | undefined
      for (const r of resourceRows) {
        const ms = r.tSec * 1000
        if (ms <= crashMs || ms > endMs) continue
        if (r.admittedRate < 0.98 * Math.min(r.capacity, r.demand)) lastShortSec = r.tSec
      }
      catchUpSec.push(lastShortSec === undefined ? 0 : lastShortSec - crashMs / 1000)
    }
    return {
      resource: t.id,
      refreshMs: t.refreshMs,
      catchUpSec,
      utilisation: utilN === 0 ? 1 : util / utilN,
      utilisationSteady: utilSteadyN === 0 ? 1 : utilSteady / utilSteadyN,
      worst1s: worstWindowRatio(t.admitted, t.capacityPerTick, windowTicks),
      worst1sSteady: worstWindowRatio(t.admitted, t.capacityPerTick, windowTicks, steady),
      excessOverBound: worstExcessOverBound(t.admitted, t.capacityPerTick, t.burst),
      excessOverBoundSteady: worstExcessOverBound(t.admitted, t.capacityPerTick, t.burst, steady),
      overCapacityEpisodes: over.count,
      overCapacityPeak: over.peak,
      jainMean: jains.length === 0 ? 1 : jains.reduce((a, b) => a + b, 0) / jains.length,
      jainMin: jains.length === 0 ? 1 : Math.min(...jains),
      convergence,
    }
  })

  const checks: { name: string; ok: boolean; detail: string }[] = []
  const ex = scenario.expect
  for (const s of summaries) {
    if (ex.minUtilisation !== undefined)
      checks.push({
        name: `${s.resource}: utilisation under excess demand ≥ ${ex.minUtilisation}`,
        ok: s.utilisationSteady >= ex.minUtilisation,
        detail: `${(s.utilisationSteady * 100).toFixed(2)}% outside failovers`,
      })
    if (ex.maxOverAdmission !== undefined)
      checks.push({
        name: `${s.resource}: admitted ≤ capacity·t + Σburst + ${ex.maxOverAdmission} outside failovers`,
        ok: s.excessOverBoundSteady <= ex.maxOverAdmission,
        detail: `worst excess ${s.excessOverBoundSteady.toFixed(1)} tokens`,
      })
    if (ex.maxConvergenceRefreshes !== undefined) {
      const worst = Math.max(
        0,
        ...s.convergence.filter((c) => !c.disturbed).map((c) => c.refreshes ?? Infinity),
      )
      checks.push({
        name: `${s.resource}: convergence within ${ex.maxConvergenceRefreshes} refresh periods of each event outside failovers`,
        ok: worst <= ex.maxConvergenceRefreshes,
        detail: `worst ${Number.isFinite(worst) ? worst.toFixed(2) : 'never'}`,
      })
    }
    if (ex.minJain !== undefined)
      checks.push({
        name: `${s.resource}: mean Jain index ≥ ${ex.minJain}`,
        ok: s.jainMean >= ex.minJain,
        detail: s.jainMean.toFixed(4),
      })
  }

  return {
    scenario,
    rows,
    tracked,
    summary: {
      name: scenario.name,
      simulatedSec: scenario.durationSec,
      wallMs: systemClock.now() - wallStart,
      clients: clients.length,
      messages: host.messages,
      lost: host.lost,
      crashes,
      resources: summaries,
      checks,
    },
  }
}
