import type { Logger } from 'pino'
import {
  SluiceError,
  protocolVersion,
  type AckMessage,
  type ClientMessage,
  type Clock,
  type DemandMessage,
  type ErrorCode,
  type HelloMessage,
  type ReleaseMessage,
  type Timer,
} from '../../shared/index.js'
import { CompiledConfig, type Config, type ResourceSettings } from '../config/index.js'
import { Pool, type DemandReport, type LeaseBatch } from '../pool/index.js'
import type { Upstream } from '../tree/index.js'
import { CoordinatorMetrics } from './metrics.js'
import type { SessionPort } from './session.js'

/** `leader` grants leases; a `follower` redirects clients to the leader (high availability). */
export type Role = 'leader' | 'follower'

interface Schedule {
  refreshMs: number
  interval: Timer
  prompt: Timer | undefined
}

/**
 * The coordinator's logic between the transport and the pool: admits
 * clients, checks their resources against config and bounds, runs a round
 * per resource every refreshMs and promptly after joins, leaves and early
 * reports, and routes lease batches to sessions. All time through `clock`.
 */
export class Coordinator {
  #pool: Pool
  readonly metrics: CoordinatorMetrics
  readonly #clock: Clock
  readonly #log: Logger
  #config: CompiledConfig
  readonly #sessions = new Map<string, SessionPort>()
  readonly #schedules = new Map<string, Schedule>()
  readonly #settingsCache = new Map<string, ResourceSettings | undefined>()
  #startedMs: number
  #role: Role
  #leaderUrl: string | undefined
  #upstream: Upstream | undefined
  #closed = false

  /** `role` follower: a replica that waits for an election before it grants anything. */
  constructor(config: Config, clock: Clock, logger: Logger, role: Role = 'leader') {
    this.#clock = clock
    this.#log = logger
    this.#config = new CompiledConfig(config)
    this.#startedMs = clock.now()
    this.#pool = new Pool(this.#startedMs)
    this.#role = role
    this.metrics = new CoordinatorMetrics((set) => this.#collect(set))
    this.metrics.isLeader.set(role === 'leader' ? 1 : 0)
  }

  /** The lease pool; a new, empty one each time this replica becomes leader. */
  get pool(): Pool {
    return this.#pool
  }

  get role(): Role {
    return this.#role
  }

  /** The leader's advertised WebSocket URL, as a follower last heard it. */
  get leaderUrl(): string | undefined {
    return this.#leaderUrl
  }

  // ---- roles (high availability) ----

  /**
   * Won an election: start afresh, in learning mode, so the holdings clients
   * report (leases of the previous leader) count before anything new is granted.
   */
  becomeLeader(): void {
    if (this.#closed || this.#role === 'leader') return
    this.#startedMs = this.#clock.now()
    this.#pool = new Pool(this.#startedMs)
    this.#role = 'leader'
    this.#leaderUrl = undefined
    this.metrics.isLeader.set(1)
    this.metrics.leaderChanges.inc({ to: 'leader' })
    this.#log.info('elected leader; learning what clients hold')
  }

  /**
   * Lost (or may have lost) leadership: stop granting at once, forget every
   * lease, and send each client to the leader, or away to retry when none is known.
   */
  stepDown(leaderUrl: string | undefined, reason: string): void {
    if (this.#closed) return
    const wasLeader = this.#role === 'leader'
    this.#role = 'follower'
    this.#leaderUrl = leaderUrl
    for (const id of [...this.#schedules.keys()]) this.#dropSchedule(id)
    this.#pool = new Pool(this.#clock.now())
    this.#settingsCache.clear()
    const sessions = [...this.#sessions.values()]
    this.#sessions.clear()
    this.metrics.connections.set(0)
    for (const session of sessions) this.#sendAway(session)
    this.metrics.isLeader.set(0)
    if (wasLeader) {
      this.metrics.leaderChanges.inc({ to: 'follower' })
      this.#log.warn({ reason, leaderUrl, clients: sessions.length }, 'stepped down as leader')
    }
  }

  /** A follower learned who leads (undefined: nobody known). */
  setLeaderUrl(url: string | undefined): void {
    if (this.#role === 'follower') this.#leaderUrl = url
  }

  get config(): Config {
    return this.#config.config
  }

  get limits(): Config['server']['limits'] {
    return this.#config.config.server.limits
  }

  get connectionCount(): number {
    return this.#sessions.size
  }

  get closed(): boolean {
    return this.#closed
  }

  settingsFor = (id: string): ResourceSettings | undefined => {
    let settings: ResourceSettings | undefined
    if (this.#settingsCache.has(id)) settings = this.#settingsCache.get(id)
    else {
      settings = this.#config.settingsFor(id)
      // Bounded: ids come from accepted subscriptions; the cache is cleared on reload and capped here.
      if (this.#settingsCache.size >= this.limits.maxResources * 2) this.#settingsCache.clear()
      this.#settingsCache.set(id, settings)
    }
    if (settings === undefined || this.#upstream === undefined) return settings
    // Downstream: the capacity is whatever the parent leases us now (0 until it does).
    const up = this.#upstream.capacity(id)
    return Object.freeze({
      ...settings,
      kind: up?.kind ?? settings.kind,
      capacity: up?.capacity ?? 0,
      burst: up?.burst ?? 0,
      leaseDeadlineMs: up?.deadlineMs,
    })
  }

  // ---- trees ----

  /** Makes this a downstream coordinator: capacity comes from `upstream`'s leases. */
  attachUpstream(upstream: Upstream): void {
    this.#upstream = upstream
  }

  /** The parent's lease for a resource changed: take the new capacity into the next round. */
  upstreamChanged(resourceId: string): void {
    if (this.pool.resource(resourceId) === undefined) return
    this.pool.updateSettings(resourceId, this.settingsFor(resourceId)!)
    this.#promptRound(resourceId)
  }

  /** Σ committed for a resource now (a downstream acknowledges a parent's decrease once this fits). */
  committed(resourceId: string): number {
    return this.pool.resource(resourceId) === undefined
      ? 0
      : this.pool.committedTotal(resourceId, this.#clock.now())
  }

  // ---- client messages ----

  /**
   * Routes one decoded message from a session: hello first and once, then
   * demand, ack and release. Every transport (WebSocket, simulator) comes
   * through here, so the protocol's order rules live in one place.
   */
  receive(session: SessionPort, msg: ClientMessage): void {
    if (msg.type === 'hello') {
      if (session.clientId !== undefined)
        return this.#fail(session, 'SLUICE_ERR_PROTO_UNEXPECTED', 'second hello')
      return this.hello(session, msg)
    }
    if (session.clientId === undefined)
      return this.#fail(session, 'SLUICE_ERR_PROTO_UNEXPECTED', `${msg.type} before hello`)
    switch (msg.type) {
      case 'demand':
        return this.demand(session, msg)
      case 'ack':
        return this.ack(session, msg)
      case 'release':
        return this.release(session, msg)
    }
  }

  hello(session: SessionPort, msg: HelloMessage): void {
    if (this.#role !== 'leader') return this.#sendAway(session)
    if (msg.v !== protocolVersion) {
      return this.#fail(
        session,
        'SLUICE_ERR_PROTO_VERSION',
        `coordinator speaks v${protocolVersion}, client sent v${msg.v}`,
      )
    }
    let tenant: string | undefined
    if (this.#config.requiresToken) {
      const token = msg.token ?? session.upgradeToken
      tenant = token === undefined ? undefined : this.#config.tenantByToken(token)
      if (tenant === undefined)
        return this.#fail(session, 'SLUICE_ERR_AUTH_INVALID_TOKEN', 'no tenant has this token')
    }
    const known = this.pool.client(msg.clientId)
    if (known === undefined && this.pool.clientCount >= this.limits.maxClients) {
      return this.#fail(
        session,
        'SLUICE_ERR_LIMIT_CLIENTS',
        `limits.maxClients is ${this.limits.maxClients}`,
      )
    }
    const tenantMax = tenant === undefined ? undefined : this.#config.tenant(tenant)?.maxClients
    if (
      tenantMax !== undefined &&
      known?.tenant !== tenant &&
      this.pool.tenantClientCount(tenant!) >= tenantMax
    ) {
      return this.#fail(
        session,
        'SLUICE_ERR_LIMIT_CLIENTS',
        `tenant ${tenant} allows ${tenantMax} clients`,
      )
    }
    const previous = this.#sessions.get(msg.clientId)
    if (previous !== undefined && previous !== session) {
      this.#sessions.delete(msg.clientId)
      previous.clientId = undefined
      previous.fail('SLUICE_ERR_SESSION_REPLACED', 'a newer connection took over this client id')
    }
    session.clientId = msg.clientId
    session.tenant = tenant
    this.#sessions.set(msg.clientId, session)
    this.pool.connect(msg.clientId, tenant)
    this.metrics.connections.set(this.#sessions.size)
    this.#log.info(
      { clientId: msg.clientId, tenant, holdings: msg.holdings?.length ?? 0 },
      'client connected',
    )

    const learningLeftMs = Math.max(0, this.#startedMs + this.#maxLearningMs() - this.#clock.now())
    session.send({
      type: 'welcome',
      v: protocolVersion,
      clientId: msg.clientId,
      ...(tenant === undefined ? {} : { tenant }),
      learningMs: Math.round(learningLeftMs),
      heartbeatMs: this.limits.heartbeatMs,
    })
    let added = 0
    const holdings = (msg.holdings ?? []).filter(
      (h) => this.#admit(session, h.resource, true, added) && ++added > 0,
    )
    if (holdings.length > 0)
      this.#dispatch(
        this.pool.learnHoldings(msg.clientId, holdings, this.settingsFor, this.#clock.now()),
      )
    for (const h of holdings) this.#ensureSchedule(h.resource)
  }

  demand(session: SessionPort, msg: DemandMessage): void {
    const clientId = session.clientId!
    const client = this.pool.client(clientId)
    const reports: DemandReport[] = []
    let added = 0
    for (const entry of msg.resources) {
      if (client?.entries.has(entry.resource) !== true) {
        if (!this.#admit(session, entry.resource, false, added)) continue
        added++
      }
      reports.push(entry)
    }
    const { batches, newResources } = this.pool.reportDemand(
      clientId,
      reports,
      this.settingsFor,
      this.#clock.now(),
    )
    this.#dispatch(batches)
    for (const id of newResources) {
      this.#ensureSchedule(id)
      this.#promptRound(id)
    }
    if (msg.early === true) for (const r of reports) this.#promptRound(r.resource)
  }

  ack(session: SessionPort, msg: AckMessage): void {
    this.metrics.acks.inc()
    this.#dispatch(this.pool.acknowledge(session.clientId!, msg.seq, this.#clock.now()))
    this.#upstream?.drained()
  }

  release(session: SessionPort, msg: ReleaseMessage): void {
    this.#dispatch(this.pool.release(session.clientId!, msg.resources, this.#clock.now()))
    for (const id of msg.resources) this.#promptRound(id)
    this.#upstream?.drained()
  }

  /** The connection ended. Leases stay committed until they lapse. */
  disconnected(session: SessionPort): void {
    const clientId = session.clientId
    if (clientId === undefined || this.#sessions.get(clientId) !== session) return
    this.#sessions.delete(clientId)
    this.metrics.connections.set(this.#sessions.size)
    for (const id of this.pool.disconnect(clientId)) this.#promptRound(id)
    this.#log.info({ clientId }, 'client disconnected')
  }

  // ---- config ----

  /** Applies a new config (already validated). Leases follow through the normal safe path. */
  applyConfig(config: Config): void {
    this.#config = new CompiledConfig(config)
    this.#settingsCache.clear()
    for (const [id] of [...this.pool.resources()]) {
      const settings = this.settingsFor(id)
      const old = this.pool.resource(id)!.settings
      // A resource no template matches any more is drained: capacity 0, leases shrink through acks.
      this.pool.updateSettings(id, settings ?? { ...old, capacity: 0, burst: 0 })
      if (settings === undefined) {
        for (const entry of this.pool.resource(id)!.entries.values()) {
          this.#sessions.get(entry.client.id)?.send({
            type: 'error',
            code: 'SLUICE_ERR_RESOURCE_UNKNOWN',
            message: 'resource no longer in config; its capacity is now 0',
            resource: id,
          })
        }
      }
      this.#reschedule(id)
      this.#promptRound(id)
    }
    this.metrics.reloads.inc({ outcome: 'applied' })
    this.#log.info(
      { resources: config.resources.length, tenants: Object.keys(config.tenants).length },
      'config applied',
    )
  }

  // ---- rounds ----

  /** Runs one round for a resource now. */
  runRound(resourceId: string): void {
    const schedule = this.#schedules.get(resourceId)
    if (schedule?.prompt !== undefined) {
      schedule.prompt.cancel()
      schedule.prompt = undefined
    }
    const startedMs = this.#clock.now()
    const batches = this.pool.round(resourceId, startedMs)
    this.metrics.rounds.inc({ resource: resourceId })
    this.metrics.roundSeconds.observe((this.#clock.now() - startedMs) / 1000)
    this.#dispatch(batches)
    if (this.pool.resource(resourceId) === undefined) return this.#dropSchedule(resourceId)
    if (this.#upstream !== undefined) {
      const { wants, weight } = this.pool.aggregate(resourceId)!
      this.#upstream.report(resourceId, wants, weight)
      this.#upstream.drained()
    }
  }

  close(): void {
    if (this.#closed) return
    this.#closed = true
    for (const id of [...this.#schedules.keys()]) this.#dropSchedule(id)
    for (const session of [...this.#sessions.values()])
      session.fail('SLUICE_ERR_SERVER_SHUTDOWN', 'coordinator closing')
    this.#sessions.clear()
  }

  // ---- internals ----

  /** Whether a client may use a resource; sends an error reply if not. */
  #admit(session: SessionPort, resourceId: string, quiet: boolean, alreadyAdded: number): boolean {
    let code: ErrorCode | undefined
    let message = ''
    const client = this.pool.client(session.clientId!)
    if (this.settingsFor(resourceId) === undefined) {
      code = 'SLUICE_ERR_RESOURCE_UNKNOWN'
      message = 'no resource template matches'
    } else if (!this.#config.allows(session.tenant, resourceId)) {
      code = 'SLUICE_ERR_RESOURCE_FORBIDDEN'
      message = `tenant ${session.tenant} may not use this resource`
    } else if ((client?.entries.size ?? 0) + alreadyAdded >= this.limits.maxResourcesPerClient) {
      code = 'SLUICE_ERR_LIMIT_RESOURCES'
      message = `limits.maxResourcesPerClient is ${this.limits.maxResourcesPerClient}`
    } else if (
      this.pool.resource(resourceId) === undefined &&
      this.pool.resourceCount + alreadyAdded >= this.limits.maxResources
    ) {
      code = 'SLUICE_ERR_LIMIT_RESOURCES'
      message = `limits.maxResources is ${this.limits.maxResources}`
    }
    if (code === undefined) return true
    this.metrics.errors.inc({ code })
    if (!quiet || code !== 'SLUICE_ERR_RESOURCE_UNKNOWN') {
      session.send({
        type: 'error',
        code,
        message: `${new SluiceError(code).message}: ${message}`,
        resource: resourceId,
      })
    }
    return false
  }

  /** A follower's answer to a client: the leader's URL, or come back later. */
  #sendAway(session: SessionPort): void {
    if (this.#leaderUrl !== undefined) {
      session.send({ type: 'redirect', url: this.#leaderUrl })
      this.#fail(session, 'SLUICE_ERR_NOT_LEADER', `the leader is ${this.#leaderUrl}`)
    } else {
      this.#fail(session, 'SLUICE_ERR_NO_LEADER', 'election in progress')
    }
  }

  #fail(session: SessionPort, code: ErrorCode, detail: string): void {
    this.metrics.errors.inc({ code })
    session.fail(code, detail)
  }

  #dispatch(batches: readonly LeaseBatch[]): void {
    for (const batch of batches) {
      const session = this.#sessions.get(batch.clientId)
      if (session === undefined) continue
      session.send({ type: 'lease', seq: batch.seq, leases: batch.leases })
      this.metrics.pushes.inc()
    }
  }

  #ensureSchedule(resourceId: string): void {
    if (this.#closed || this.#schedules.has(resourceId)) return
    const r = this.pool.resource(resourceId)
    if (r === undefined) return
    const refreshMs = r.settings.refreshMs
    this.#upstream?.link(resourceId, r.settings.kind, r.settings.failureMode)
    const interval = this.#clock.setInterval(() => this.runRound(resourceId), refreshMs).unref()
    this.#schedules.set(resourceId, { refreshMs, interval, prompt: undefined })
  }

  #reschedule(resourceId: string): void {
    const schedule = this.#schedules.get(resourceId)
    const r = this.pool.resource(resourceId)
    if (schedule === undefined || r === undefined || schedule.refreshMs === r.settings.refreshMs)
      return
    this.#dropSchedule(resourceId, false)
    this.#ensureSchedule(resourceId)
  }

  #dropSchedule(resourceId: string, unlink = true): void {
    const schedule = this.#schedules.get(resourceId)
    if (schedule === undefined) return
    schedule.interval.cancel()
    schedule.prompt?.cancel()
    this.#schedules.delete(resourceId)
    if (unlink) this.#upstream?.unlink(resourceId)
  }

  /** A round soon (debounced), so a burst of joins or reports costs one round. */
  #promptRound(resourceId: string): void {
    const schedule = this.#schedules.get(resourceId)
    if (schedule === undefined || schedule.prompt !== undefined) return
    schedule.prompt = this.#clock.setTimeout(() => {
      schedule.prompt = undefined
      this.runRound(resourceId)
    }, this.limits.roundDebounceMs)
  }

  #maxLearningMs(): number {
    let max = 0
    for (const t of this.#config.config.resources)
      max = Math.max(max, t.learningMs ?? t.leaseTtlMs + t.graceMs)
    return max
  }

  #collect(set: Parameters<ConstructorParameters<typeof CoordinatorMetrics>[0]>[0]): void {
    const now = this.#clock.now()
    for (const [id, r] of this.pool.resources()) {
      let demand = 0
      let grant = 0
      for (const e of r.entries.values()) {
        demand += e.client.connected ? e.history.estimate() : 0
        grant += e.target
      }
      const committed = this.pool.committedTotal(id, now)
      set(id, {
        capacity: r.settings.capacity,
        committed,
        free: Math.max(0, r.settings.capacity - committed),
        demand,
        grant,
        clients: r.entries.size,
        learning: now < r.learningUntilMs ? 1 : 0,
      })
    }
  }
}
