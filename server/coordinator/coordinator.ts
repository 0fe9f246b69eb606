import { randomBytes } from 'node:crypto'
import type { Logger } from 'pino'
import {
  formatError,
  entriesOf,
  protocolVersion,
  type AckMessage,
  type ClientMessage,
  type Clock,
  type DemandMessage,
  type ErrorCode,
  type HelloMessage,
  type ReleaseMessage,
} from '../../shared/index.js'
import { TokenBucket } from '../../shared/limiters/index.js'
import {
  CompiledConfig,
  windowAt,
  type Config,
  type Limits,
  type ResourceSettings,
} from '../config/index.js'
import {
  restoredUntilMs,
  writtenBeforeLast,
  type Ledger,
  type LedgerEntry,
} from '../ledger/index.js'
import { Pool, clientKey, type Holding, type LeaseBatch, type QuotaClock } from '../pool/index.js'
import type { Upstream } from '../tree/index.js'
import {
  admitClient,
  admitEntries,
  admitPriorities,
  FrameRefusals,
  type AdmissionContext,
} from './admission.js'
import { AuthGuard } from './auth-guard.js'
import {
  CoordinatorMetrics,
  Observer,
  ResourceView,
  type ResourceFigures,
} from '../observe/index.js'
import { provenHolding, signBatches, type ClaimedHolding, type HoldingsKeys } from './proofs.js'
import { RoundScheduler } from './scheduler.js'
import type { SessionPort } from './session-port.js'
import { SessionTable } from './session-table.js'
import { SettingsSource } from './settings.js'
import { WriteAhead, type WriteAheadHost } from './write-ahead.js'

/** `leader` grants leases; a `follower` redirects clients to the leader (high availability). */
export type Role = 'leader' | 'follower'

/**
 * The coordinator: routes each client message to admission, the pool and
 * the round scheduler, and sends what the pool decides. It holds the role
 * (leader or follower), the settings source (config, and a parent's leases
 * in a tree) and the sessions; the figures it shows go through `view`.
 * Transport-independent (a session is a `SessionPort`); all time through `clock`.
 */
export class Coordinator {
  #pool: Pool
  readonly metrics: CoordinatorMetrics
  /** Read-only figures of every resource, for the status API and the metrics. */
  readonly view: ResourceView
  /** Clients' usage, each resource's history: what operators see (never read by the allocation). */
  readonly observer: Observer
  /** Slows token guessing, on the WebSocket and HTTP surfaces alike; kept across reloads. */
  readonly guard: AuthGuard
  readonly #clock: Clock
  readonly #log: Logger
  readonly #settings: SettingsSource
  readonly #rounds: RoundScheduler
  readonly #sessions = new SessionTable()
  readonly #tenantBudgets = new Map<string, TokenBucket>()
  /** This process's epoch: ledger entries it writes carry it with its monotonic clock. */
  readonly #epoch = randomBytes(8).toString('hex')
  #startedMs: number
  #role: Role
  #leaderUrl: string | undefined
  /** Signs leases and verifies claimed holdings; without it, no claim is trusted. */
  #keys: HoldingsKeys | undefined
  /** Where commitments are written before the leases they cover are sent. */
  #writeAhead: WriteAhead | undefined
  /** Whether this coordinator started from a trusted ledger (no learning). */
  #restored = false
  /** Its ledger was new (nothing was ever leased from it): see attachLedger. */
  #neverLeased = false
  /** Leadership comes from an election: a replica that cannot write its ledger steps down. */
  #elected = false
  /** Until when this replica surely leads (an election's lease); always, without one. */
  #leadingUntilMs: () => number = () => Infinity
  #closed = false

  /** `role` follower: a replica that waits for an election before it grants anything. */
  constructor(config: Config, clock: Clock, logger: Logger, role: Role = 'leader') {
    this.#clock = clock
    this.#log = logger
    this.#settings = new SettingsSource(
      new CompiledConfig(config),
      () => this.limits.maxResources * 2,
    )
    this.#rounds = new RoundScheduler(
      clock,
      () => this.limits.roundDebounceMs,
      (id) => this.runRound(id),
      (id) => this.#grantWaiting(id),
    )
    this.#startedMs = clock.now()
    this.#pool = this.#newPool()
    this.#role = role
    this.view = new ResourceView(() => this.#pool, clock)
    this.metrics = new CoordinatorMetrics(
      () => this.#resourcesForMetrics(),
      (id) => this.observer.usage.current(id, this.#clock.now()),
      () => this.limits.maxUsageSeries,
      () => this.view.families(0),
    )
    this.observer = new Observer({
      clock,
      view: this.view,
      metrics: this.metrics,
      maxHistoryResources: () => this.limits.maxHistoryResources,
      knows: (key) => this.#pool.hasClient(key),
    })
    this.observer.start()
    this.metrics.isLeader.set(role === 'leader' ? 1 : 0)
    this.guard = new AuthGuard(() => this.limits, clock, logger, this.metrics)
    this.#warnConfig(config)
  }

  /**
   * Says what a config leaves open, whenever one is applied: optimistic is
   * the one failure mode that may exceed capacity; a tenant without a
   * `resources` list may use every resource.
   */
  #warnConfig(config: Config): void {
    for (const [name, tenant] of Object.entries(config.tenants))
      if (tenant.resources === undefined)
        this.#log.warn(
          { tenant: name },
          "tenant without a resources list: it may use every resource (set resources: ['*'] to say so)",
        )
    for (const t of config.resources)
      if (t.failureMode === 'optimistic')
        this.#log.warn(
          { match: t.match },
          'failureMode optimistic: while the parent is unreachable, this coordinator may share out more than the parent leased',
        )
  }

  get role(): Role {
    return this.#role
  }

  /** The leader's advertised WebSocket URL, as a follower last heard it. */
  get leaderUrl(): string | undefined {
    return this.#leaderUrl
  }

  get config(): Config {
    return this.#settings.config.config
  }

  get limits(): Limits {
    return this.#settings.config.config.server.limits
  }

  get connectionCount(): number {
    return this.#sessions.size
  }

  get closed(): boolean {
    return this.#closed
  }

  /** The tenant whose token this is (constant-time look-up). */
  tenantByToken(token: string): string | undefined {
    return this.#settings.config.tenantByToken(token)
  }

  /**
   * Every resource with clients, then each named resource of the config no client uses yet,
   * idle: a dashboard and its alerts see the series from the start, not from the first client.
   */
  #resourcesForMetrics(): ResourceFigures[] {
    const inUse = this.view.resources()
    if (this.#role !== 'leader') return inUse
    const seen = new Set(inUse.map((r) => r.id))
    for (const t of this.config.resources) {
      if (t.match.includes('*') || t.keyed || seen.has(t.match)) continue
      const s = this.#settings.lookup(t.match)
      if (s === undefined) continue
      seen.add(t.match)
      inUse.push(idleFigures(s))
    }
    return inUse
  }

  /** Settings of a resource as the pool runs it (a downstream's capacity is its parent's lease). */
  settingsFor(id: string): ResourceSettings | undefined {
    return this.#settings.lookup(id)
  }

  // ---- roles (high availability) ----

  /**
   * Won an election: start afresh, in learning mode, so the holdings clients
   * report (leases of the previous leader) count before anything new is granted.
   */
  becomeLeader(restored?: readonly LedgerEntry[]): void {
    if (this.#closed || this.#role === 'leader') return
    this.#startedMs = this.#clock.now()
    this.#restored = restored !== undefined
    // A previous leader may have leased anything: the pool knows only from now.
    this.#neverLeased = false
    this.#pool = this.#newPool()
    this.#role = 'leader'
    this.#leaderUrl = undefined
    this.metrics.isLeader.set(1)
    this.metrics.leaderChanges.inc({ to: 'leader' })
    if (restored === undefined) this.#log.info('elected leader; learning what clients hold')
    else {
      const n = this.#pool.restore(restored, this.#restoredUntil(restored), this.#clock.now())
      for (const id of this.#pool.resourceIds()) this.#ensureSchedule(id)
      this.#log.info({ entries: n }, 'elected leader; resumed from the ledger, no learning')
    }
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
    for (const id of this.#rounds.ids()) this.#dropSchedule(id)
    this.#pool = this.#newPool()
    this.#settings.clear()
    const sessions = this.#sessions.takeAll()
    this.metrics.connections.set(0)
    for (const session of sessions) this.#sendAway(session)
    this.metrics.isLeader.set(0)
    if (wasLeader) {
      this.metrics.leaderChanges.inc({ to: 'follower' })
      this.#log.warn({ reason, leaderUrl, clients: sessions.length }, 'stepped down as leader')
    }
  }

  /**
   * Fencing: from now on every message and every round first checks that
   * this replica still surely leads, and steps down if not, before anything
   * is granted.
   */
  fence(leadingUntilMs: () => number): void {
    this.#leadingUntilMs = leadingUntilMs
    this.#elected = true
  }

  /**
   * The holdings key (config, or SLUICE_HOLDINGS_KEY): leases are signed
   * with it, and a learning coordinator restores only holdings whose proof
   * verifies and has not expired. Without one it trusts no claim.
   */
  setHoldingsKeys(keys: HoldingsKeys | undefined): void {
    this.#keys = keys
  }

  /**
   * Writes commitments to `ledger` before it sends the leases they cover
   * (write-ahead; decreases and lapses may follow later). With `restored`,
   * entries a ledger kept: the pool starts from them and grants what is free
   * at once, without learning. Undefined: the ledger could not be trusted,
   * so the coordinator learns as without one.
   */
  attachLedger(ledger: Ledger, restored: readonly LedgerEntry[] | undefined): void {
    this.#writeAhead = new WriteAhead(ledger, this.#clock, this.#writeAheadHost)
    this.#restored = restored !== undefined
    // A ledger never written before, trusted: nothing was ever leased, so no bucket anywhere
    // holds a token of any resource (a first lease may start full at once).
    this.#neverLeased = ledger.fresh && restored !== undefined
    this.#pool = this.#newPool()
    if (restored !== undefined) {
      const n = this.#pool.restore(restored, this.#restoredUntil(restored), this.#clock.now())
      for (const id of this.#pool.resourceIds()) this.#ensureSchedule(id)
      this.#log.info({ ledger: ledger.kind, entries: n }, 'resumed from the ledger; no learning')
    }
  }

  /** How this coordinator knows what clients hold: `ledger` (restored), `learning`, or `none` (no ledger). */
  get ledgerState(): { kind: string; started: 'restored' | 'learning' } {
    return {
      kind: this.#writeAhead?.ledger.kind ?? 'none',
      started: this.#restored ? 'restored' : 'learning',
    }
  }

  #toWallMs(monoMs: number): number {
    return monoMs - this.#clock.now() + this.#clock.wallNow()
  }

  /**
   * A restored commitment's end on this process's clock (`restoredUntilMs`):
   * at least what it had left at its writer's last write (exact on the
   * writer's monotonic clock), so a wall clock stepped either way cannot
   * shorten it, and a lease that had run out by the crash is not brought back.
   */
  #restoredUntil(entries: readonly LedgerEntry[]): (wallMs: number, e: LedgerEntry) => number {
    const before = writtenBeforeLast(entries)
    const wallNow = this.#clock.wallNow()
    const monoNow = this.#clock.now()
    return (wallMs, e) => restoredUntilMs(wallMs, e.writtenMs, wallNow, monoNow, before(e))
  }

  /** Whether this replica may grant now; a leader past its deadline steps down here. */
  #mayGrant(): boolean {
    if (this.#role !== 'leader') return false
    if (this.#clock.now() < this.#leadingUntilMs()) return true
    this.stepDown(undefined, 'leadership not confirmed in time (paused, or etcd unreachable)')
    return false
  }

  /** A follower learned who leads (undefined: nobody known). */
  setLeaderUrl(url: string | undefined): void {
    if (this.#role === 'follower') this.#leaderUrl = url
  }

  // ---- trees ----

  /** Makes this a downstream coordinator: capacity comes from `upstream`'s leases. */
  attachUpstream(upstream: Upstream): void {
    this.#settings.attachUpstream(upstream)
  }

  /** The parent's lease for a resource changed: take the new capacity into the next round. */
  upstreamChanged(resourceId: string): void {
    if (!this.#pool.hasResource(resourceId)) return
    this.#pool.refreshSettings(resourceId)
    this.#rounds.prompt(this.#scheduleId(resourceId))
  }

  /** Σ committed for a resource now (a downstream acknowledges a parent's decrease once this fits). */
  committed(resourceId: string): number {
    return this.view.committed(resourceId)
  }

  // ---- client messages ----

  /**
   * Routes one decoded message from a session: hello first and once, then
   * demand, ack and release. Every transport (WebSocket, simulator) comes
   * through here, so the protocol's order rules live in one place.
   */
  receive(session: SessionPort, msg: ClientMessage): void {
    // Fencing: a replica that may have lost leadership answers nothing but a redirect.
    if (!this.#mayGrant()) return this.#sendAway(session)
    if (session.tenant !== undefined && !this.#tenantBudget(session.tenant).tryTake(entriesOf(msg)))
      return this.#fail(
        session,
        'SLUICE_ERR_PROTO_RATE_LIMITED',
        `tenant ${session.tenant}: limits.maxEntriesPerSecPerTenant is ${this.limits.maxEntriesPerSecPerTenant}`,
      )
    if (msg.type === 'hello') {
      if (session.clientId !== undefined)
        return this.#fail(session, 'SLUICE_ERR_PROTO_UNEXPECTED', 'second hello')
      return this.#hello(session, msg)
    }
    if (session.clientId === undefined)
      return this.#fail(session, 'SLUICE_ERR_PROTO_UNEXPECTED', `${msg.type} before hello`)
    switch (msg.type) {
      case 'demand':
        return this.#demand(session, msg)
      case 'ack':
        return this.#ack(session, msg)
      case 'release':
        return this.#release(session, msg)
    }
  }

  /**
   * The entries a tenant's connections may still send together: the work one
   * tenant can cause per second, whatever number of connections it opens.
   * One bucket per configured tenant (a bounded set).
   */
  #tenantBudget(tenant: string): TokenBucket {
    let budget = this.#tenantBudgets.get(tenant)
    const rate = this.limits.maxEntriesPerSecPerTenant
    if (budget === undefined || budget.ratePerSec !== rate) {
      budget = new TokenBucket(this.#clock, rate, 2 * rate)
      this.#tenantBudgets.set(tenant, budget)
    }
    return budget
  }

  /** The connection ended. Leases stay committed until they lapse. */
  disconnected(session: SessionPort): void {
    const clientId = session.clientId
    if (clientId === undefined || !this.#sessions.unbind(session)) return
    this.metrics.connections.set(this.#sessions.size)
    const key = clientKey(session.tenant, clientId)
    for (const id of this.#pool.disconnect(key, this.#clock.now()))
      this.#rounds.prompt(this.#scheduleId(id))
    this.#dispatch([])
    this.#log.info({ clientId, tenant: session.tenant }, 'client disconnected')
  }

  #hello(session: SessionPort, msg: HelloMessage): void {
    const checked = this.#settings.config.requiresToken
    if (checked && !this.guard.mayTry(session.remoteAddress, 'websocket'))
      return this.#fail(session, 'SLUICE_ERR_AUTH_RATE_LIMITED', 'wait before trying another token')
    const verdict = admitClient(this.#admissionContext, msg, session.upgradeToken)
    if ('code' in verdict) {
      if (verdict.code === 'SLUICE_ERR_AUTH_INVALID_TOKEN')
        this.guard.failed(session.remoteAddress, 'websocket')
      return this.#fail(session, verdict.code, verdict.detail)
    }
    const tenant = verdict.tenant
    const key = clientKey(tenant, msg.clientId)
    this.#sessions.bind(session, key, msg.clientId, tenant)
    this.observer.usage.identify(key, { name: msg.name, library: msg.library })
    const outcome = this.#pool.connect(key, msg.clientId, tenant, msg.instance, this.#clock.now())
    this.metrics.connections.set(this.#sessions.size)
    if (outcome === 'replaced')
      this.#log.warn(
        { clientId: msg.clientId, tenant },
        'another process took this client id over; the old one keeps its leases until they lapse',
      )
    this.#log.info(
      { clientId: msg.clientId, tenant, outcome, holdings: msg.holdings?.length ?? 0 },
      'client connected',
    )
    const learningLeftMs = this.#restored
      ? 0
      : Math.max(0, this.#startedMs + this.#settings.config.maxLearningMs() - this.#clock.now())
    session.send({
      type: 'welcome',
      v: protocolVersion,
      clientId: msg.clientId,
      ...(tenant === undefined ? {} : { tenant }),
      learningMs: Math.round(learningLeftMs),
      heartbeatMs: this.limits.heartbeatMs,
      ...(this.#ledgerId === undefined ? {} : { ledger: this.#ledgerId }),
    })
    // Holdings of resources the client may not use are dropped quietly but for real refusals:
    // an unknown resource in a hello is what a config change leaves behind, not a mistake.
    const refusals = new FrameRefusals(true)
    const holdings = admitEntries(
      this.#admissionContext,
      key,
      tenant,
      msg.holdings ?? [],
      (r) => r.resource,
      refusals.add,
    )
    this.#answer(session, refusals)
    if (holdings.length === 0) return
    this.#witness(key, msg.ledger, holdings)
    const proven = holdings.map((h) => this.#proven(msg.clientId, tenant, h))
    this.#dispatch(this.#pool.learnHoldings(key, proven, this.#clock.now()))
    for (const h of holdings) this.#ensureSchedule(h.resource)
  }

  /** The id of the ledger this coordinator resumed from or started (a welcome names it). */
  get #ledgerId(): string | undefined {
    const id = this.#writeAhead?.ledger.id
    return id === undefined || id === '' ? undefined : id
  }

  /**
   * A client as witness of the ledger: it holds more than this coordinator's
   * ledger records for it, leased under another ledger (or none). A data
   * directory that was lost or replaced can only be told from a new one this
   * way, so a coordinator that resumed without learning starts learning now,
   * as it would have from its start: nothing more is granted until what the
   * unknown ledger sent has lapsed.
   */
  #witness(key: string, ledger: string | undefined, holdings: readonly ClaimedHolding[]): void {
    if (!this.#restored || ledger === this.#ledgerId) return
    const nowMs = this.#clock.now()
    const unknown = holdings.find(
      (h) =>
        Math.max(h.capacity, h.inFlight ?? 0) >
        this.#pool.committedBy(key, h.resource, nowMs) + 1e-9,
    )
    if (unknown === undefined) return
    this.#restored = false
    this.#pool.learnFromStart()
    this.metrics.errors.inc({ code: 'SLUICE_ERR_LEDGER_CORRUPT' })
    this.#log.error(
      { ledger: this.#ledgerId, claimedFrom: ledger ?? null, resource: unknown.resource },
      'a client holds a lease this ledger does not know (a lost or replaced data directory?): learning now, as from the start',
    )
  }

  /** How much of a claimed holding counts (`provenHolding`); a claim that does not verify is logged. */
  #proven(clientId: string, tenant: string | undefined, h: ClaimedHolding): Holding {
    const holder = { tenant, clientId }
    const { capacity, claimed, suspect, issued } = provenHolding(
      this.#keys,
      holder,
      h,
      this.#clock.wallNow(),
    )
    if (suspect)
      this.#log.warn(
        { clientId, tenant, resource: h.resource, claimed },
        'holding not restored: its proof does not verify',
      )
    return { resource: h.resource, capacity, issued }
  }

  #demand(session: SessionPort, msg: DemandMessage): void {
    const ctx = this.#admissionContext
    const key = this.#key(session)
    const refusals = new FrameRefusals(false)
    const banded = admitPriorities(ctx, session.tenant, msg.resources, refusals.add)
    const reports = admitEntries(ctx, key, session.tenant, banded, (e) => e.resource, refusals.add)
    this.#answer(session, refusals)
    for (const r of reports)
      if (r.usage !== undefined) this.observer.record(r.resource, key, session.tenant, r.usage)
    const { batches, newResources } = this.#pool.reportDemand(key, reports, this.#clock.now())
    this.#dispatch(batches)
    for (const id of newResources) {
      this.#ensureSchedule(id)
      this.#rounds.prompt(this.#scheduleId(id))
    }
    if (msg.early === true)
      for (const r of reports) this.#rounds.prompt(this.#scheduleId(r.resource))
  }

  #ack(session: SessionPort, msg: AckMessage): void {
    this.metrics.acks.inc()
    this.#dispatch(
      this.#pool.acknowledge(this.#key(session), msg.seq, msg.resources, this.#clock.now()),
    )
    this.#promptWaiting()
    this.#settings.upstream?.drained()
  }

  #release(session: SessionPort, msg: ReleaseMessage): void {
    this.#dispatch(this.#pool.release(this.#key(session), msg.resources, this.#clock.now()))
    this.#promptWaiting()
    for (const id of msg.resources) this.#rounds.prompt(this.#scheduleId(id))
    this.#settings.upstream?.drained()
  }

  /**
   * Acks grant only whole increases; what they leave waiting that free
   * capacity could partly serve is granted a debounce later, once the
   * round's other acks have had time to come.
   */
  #promptWaiting(): void {
    for (const id of this.#pool.takeWaiting()) this.#rounds.promptGrant(this.#scheduleId(id))
  }

  #grantWaiting(resourceId: string): void {
    if (this.#closed || !this.#mayGrant()) return
    const family = this.#settings.lookup(resourceId)?.family
    this.#dispatch(
      family?.role === 'family'
        ? this.#pool.grantWaitingMany(this.#pool.familyIds(resourceId), this.#clock.now())
        : this.#pool.grantWaiting(resourceId, this.#clock.now()),
    )
  }

  /** What is scheduled for a resource: itself, or for a key of a family, the family. */
  #scheduleId(resourceId: string): string {
    const family = this.#settings.lookup(resourceId)?.family
    return family?.role === 'key' ? family.familyId : resourceId
  }

  /** Answers a frame's refusals: one error message per code (FrameRefusals). */
  #answer(session: SessionPort, refusals: FrameRefusals): void {
    refusals.flush(
      (message) => session.send(message),
      (code, n) => this.metrics.errors.inc({ code }, n),
    )
  }

  /** The pool's key of a session's client. */
  #key(session: SessionPort): string {
    return clientKey(session.tenant, session.clientId!)
  }

  /** What admission reads, always current (made once: the demand path runs per report). */
  readonly #admissionContext: AdmissionContext = ((self: Coordinator) => ({
    get config() {
      return self.#settings.config
    },
    get limits() {
      return self.limits
    },
    get pool() {
      return self.#pool
    },
    get settingsFor() {
      return self.#settings.lookup
    },
  }))(this)

  // ---- config ----

  /** Applies a new config (already validated). Leases follow through the normal safe path. */
  applyConfig(config: Config): void {
    this.#settings.setConfig(new CompiledConfig(config))
    for (const id of this.#pool.resourceIds()) {
      if (!this.#pool.refreshSettings(id)) {
        // No template matches any more: the pool drains it to 0; say so to its clients.
        for (const clientId of this.#pool.subscribers(id)) {
          this.#sessions.send(clientId, {
            type: 'error',
            code: 'SLUICE_ERR_RESOURCE_UNKNOWN',
            message: formatError(
              'SLUICE_ERR_RESOURCE_UNKNOWN',
              'resource no longer in config; its capacity is now 0',
            ),
            resource: id,
          })
        }
      }
      const scheduled = this.#scheduleId(id)
      if (scheduled === id) this.#rounds.reschedule(id, this.#pool.settings(id)!.refreshMs)
      this.#rounds.prompt(scheduled)
    }
    this.#warnConfig(config)
    this.metrics.reloads.inc({ outcome: 'applied' })
    this.#log.info(
      { resources: config.resources.length, tenants: Object.keys(config.tenants).length },
      'config applied',
    )
  }

  // ---- rounds ----

  /** Runs one round for a resource now. */
  runRound(resourceId: string): void {
    this.#rounds.settlePrompt(resourceId)
    if (!this.#mayGrant()) return
    const startedMs = this.#clock.now()
    // A keyed family runs with all its hot keys: one batch per client for all of them.
    const family = this.#settings.lookup(resourceId)?.family
    const ids = family?.role === 'family' ? this.#pool.familyIds(resourceId) : undefined
    const batches =
      ids === undefined
        ? this.#pool.round(resourceId, startedMs)
        : this.#pool.roundMany(ids, startedMs)
    this.metrics.rounds.inc({ resource: resourceId })
    this.metrics.roundSeconds.observe((this.#clock.now() - startedMs) / 1000)
    this.#dispatch(batches)
    if (
      ids === undefined
        ? !this.#pool.hasResource(resourceId)
        : this.#pool.familyIds(resourceId).every((id) => !this.#pool.hasResource(id))
    )
      return this.#dropSchedule(resourceId)
    const upstream = this.#settings.upstream
    if (upstream !== undefined) {
      const { wants, weight } = this.#pool.aggregate(resourceId)!
      upstream.report(resourceId, wants, weight)
      upstream.drained()
    }
  }

  close(): void {
    if (this.#closed) return
    this.#closed = true
    this.observer.close()
    for (const id of this.#rounds.ids()) this.#dropSchedule(id)
    for (const session of this.#sessions.takeAll())
      session.fail('SLUICE_ERR_SERVER_SHUTDOWN', 'coordinator closing')
  }

  // ---- internals ----

  #newPool(): Pool {
    return new Pool(this.#startedMs, this.#settings.lookup, {
      learn: !this.#restored,
      track: this.#writeAhead !== undefined,
      sendDelayMs:
        this.#writeAhead === undefined || this.#writeAhead.ledger.synchronous
          ? 0
          : this.config.server.ledgerMaxWriteMs,
      quotaClock: this.#quotaClock,
      // From now on the pool sees every lease (before: what the ledger restored, or learning).
      quietSinceMs: this.#neverLeased ? -Infinity : this.#clock.now(),
    })
  }

  /** Quota windows are wall-clock windows (a day is a day); the pool runs on the monotonic clock. */
  readonly #quotaClock: QuotaClock = (spec, nowMs) => {
    const wallMs = nowMs - this.#clock.now() + this.#clock.wallNow()
    const w = windowAt(spec, wallMs)
    return {
      index: w.index,
      startMs: nowMs + (w.startMs - wallMs),
      endMs: nowMs + (w.endMs - wallMs),
    }
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

  /**
   * Sends lease batches: with a ledger, only once the changes that cover them
   * are written (`WriteAhead`). A failed write sends nothing: its leases stay
   * counted and lapse.
   */
  #dispatch(batches: readonly LeaseBatch[]): void {
    if (this.#closed) return
    if (this.#writeAhead === undefined) return this.#send(batches)
    this.#writeAhead.dispatch(batches)
  }

  /** Resolves once no ledger write is in flight or queued (tests and orderly shutdown). */
  ledgerIdle(): Promise<void> {
    return this.#writeAhead?.idle() ?? Promise.resolve()
  }

  /** What the write-ahead queue calls back. */
  readonly #writeAheadHost: WriteAheadHost = ((self: Coordinator) => ({
    takeChanges: () => {
      const changes = self.#pool.takeChanges((monoMs) => self.#toWallMs(monoMs))
      const writtenMs = self.#clock.wallNow()
      const writtenMono = self.#clock.now()
      const epoch = self.#epoch
      return changes.map((c) =>
        'put' in c ? { put: { ...c.put, writtenMs, writtenMono, epoch } } : c,
      )
    },
    send: (batches) => self.#send(batches),
    unsent: (batches) => self.#pool.unsent(batches),
    // A replica that cannot write what it grants (fenced, or etcd gone) may not lead.
    failed: () => {
      if (self.#elected && self.#role === 'leader') self.stepDown(undefined, 'ledger write failed')
    },
    maxWriteMs: () => self.config.server.ledgerMaxWriteMs,
    get metrics() {
      return self.metrics
    },
    get log() {
      return self.#log
    },
  }))(this)

  #send(batches: readonly LeaseBatch[]): void {
    if (batches.length === 0) return
    if (this.#keys !== undefined)
      signBatches(
        this.#keys,
        batches,
        (key) => this.#sessions.get(key),
        (resource) => this.#pool.settings(resource)?.graceMs ?? 0,
        this.#clock.wallNow(),
      )
    this.metrics.pushes.inc(this.#sessions.dispatch(batches))
  }

  #ensureSchedule(id: string): void {
    const resourceId = this.#scheduleId(id)
    if (this.#closed || this.#rounds.has(resourceId)) return
    const settings = this.#settings.lookup(resourceId)
    if (settings === undefined) return
    this.#settings.upstream?.link(resourceId, settings.kind, settings.failureMode)
    this.#rounds.ensure(resourceId, settings.refreshMs)
  }

  #dropSchedule(resourceId: string): void {
    if (this.#rounds.drop(resourceId)) this.#settings.upstream?.unlink(resourceId)
  }
}

/** A configured resource no client uses: its capacity, nothing committed, asked or leased. */
function idleFigures(s: ResourceSettings): ResourceFigures {
  return {
    id: s.id,
    kind: s.kind,
    capacity: s.capacity,
    committed: 0,
    free: s.capacity,
    demand: 0,
    grant: 0,
    clients: 0,
    learning: false,
    rounds: 0,
  }
}
