import type { Logger } from 'pino'
import {
  entriesOf,
  familyIdOf,
  keyIdOf,
  type ClientMessage,
  type DecideMessage,
  type Clock,
  type ErrorCode,
} from '../../shared/index.js'
import { CompiledConfig, type Config, type Limits, type ResourceSettings } from '../config/index.js'
import type { Ledger, LedgerEntry } from '../ledger/index.js'
import {
  CoordinatorMetrics,
  Observer,
  ResourceView,
  withIdleResources,
  type ResourceFigures,
} from '../observe/index.js'
import { centralClientId, clientKey, type KeyResetOutcome, type Pool } from '../pool/index.js'
import type { Upstream } from '../tree/index.js'
import { AuthGuard } from './auth-guard.js'
import type { Core } from './core.js'
import { hello } from './handshake.js'
import { Central } from './central.js'
import { Leadership, type Role } from './leadership.js'
import { Outbox, type OutboxHost } from './outbox.js'
import type { HoldingsKeys } from './proofs.js'
import { PoolStart } from './pool-start.js'
import { reapply, warnConfig } from './reload.js'
import { ack, demand, release } from './reports.js'
import { Rounds } from './rounds.js'
import type { SessionPort } from './session-port.js'
import { SessionTable } from './session-table.js'
import { SettingsSource } from './settings.js'
import { TenantBudgets } from './tenant-budgets.js'

export type { Role } from './leadership.js'

/**
 * The coordinator: routes each client message (hello to `handshake`, demand,
 * acks and releases to `reports`), holds the role (leader or follower; a
 * follower redirects) and what the pool starts from (a ledger, or learning),
 * and lets `rounds` run the allocation and `outbox` send what the pool
 * decides. Its parts read it through one `Core`; the figures it shows go
 * through `view`. Transport-independent (a session is a `SessionPort`); all
 * time through `clock`.
 */
export class Coordinator {
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
  readonly #sessions = new SessionTable()
  readonly #leadership: Leadership
  readonly #tenantBudgets: TenantBudgets
  /** Remote decisions a tenant is refused past its budget, answered up to as many again. */
  readonly #tenantRefusals: TenantBudgets
  readonly #core: Core & OutboxHost
  readonly #rounds: Rounds
  /** Where lease batches leave: written to the ledger first, when there is one. */
  readonly #outbox: Outbox
  readonly #start: PoolStart
  /** The coordinator's own part of every key, where remote decisions are taken (central.ts). */
  readonly #central: Central
  #pool: Pool
  /** Signs leases and verifies claimed holdings; without it, no claim is trusted. */
  #keys: HoldingsKeys | undefined
  #closed = false

  /** `role` follower: a replica that waits for an election before it grants anything. */
  constructor(config: Config, clock: Clock, logger: Logger, role: Role = 'leader') {
    this.#clock = clock
    this.#log = logger
    this.#settings = new SettingsSource(
      new CompiledConfig(config),
      () => this.limits.maxResources * 2,
    )
    this.#leadership = new Leadership(role)
    this.#tenantBudgets = new TenantBudgets(clock, () => this.limits.maxEntriesPerSecPerTenant)
    this.#tenantRefusals = new TenantBudgets(clock, () => this.limits.maxEntriesPerSecPerTenant)
    this.view = new ResourceView(() => this.#pool, clock)
    this.metrics = new CoordinatorMetrics(
      () => this.#resourcesForMetrics(),
      (id) => this.observer.usage.current(id, this.#clock.now()),
      () => this.limits.maxUsageSeries,
      () => this.observer.families(0),
    )
    this.observer = new Observer({
      clock,
      view: this.view,
      metrics: this.metrics,
      maxHistoryResources: () => this.limits.maxHistoryResources,
      knows: (key) => this.#pool.hasClient(key),
    })
    this.guard = new AuthGuard(() => this.limits, clock, logger, this.metrics)
    this.#core = this.#makeCore()
    this.#rounds = new Rounds(clock, () => this.limits.roundDebounceMs, this.#core)
    this.#outbox = new Outbox(this.#core)
    this.#start = new PoolStart(clock, this.#settings, () => this.#outbox.ledger)
    this.#pool = this.#start.pool()
    this.#central = new Central(
      {
        receive: (session, msg) => this.receive(session, msg),
        disconnected: (session) => this.disconnected(session),
        familyOfKey: (id) => this.#settings.config.familyOfKey(id),
        familyOf: (id) => {
          const family = this.#settings.config.settingsFor(id)?.family
          return family?.role === 'family' ? family : undefined
        },
        allows: (tenant, id) => this.#core.config.allows(tenant, id),
        meantFor: (tenant, id) => this.#pool.meantFor(clientKey(tenant, centralClientId), id),
        reserve: {
          reserve: (tenant, familyId, window, keys) =>
            this.#pool.reserveSpend(clientKey(tenant, centralClientId), familyId, window, keys),
          full: (tenant, familyId, window) =>
            this.#pool.reserveFull(clientKey(tenant, centralClientId), familyId, window),
          afterWrite: (then) => this.#outbox.afterWrite(then),
          withNextWrite: (then) => this.#outbox.withNextWrite(then),
        },
      },
      clock,
      logger,
      (family, outcome, n) => this.metrics.remoteDecisions.inc({ family, outcome }, n),
    )
    this.observer.start()
    this.metrics.isLeader.set(role === 'leader' ? 1 : 0)
    warnConfig(config, logger)
  }

  get role(): Role {
    return this.#leadership.role
  }

  /** The leader's advertised WebSocket URL, as a follower last heard it. */
  get leaderUrl(): string | undefined {
    return this.#leadership.leaderUrl
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

  /** Every resource with clients, then (on a leader) the config's named resources no client uses yet. */
  #resourcesForMetrics(): ResourceFigures[] {
    const inUse = this.view.resources()
    if (this.role !== 'leader') return inUse
    return withIdleResources(inUse, this.config.resources, this.#settings.lookup)
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
    if (this.#closed || this.role === 'leader') return
    this.#pool = this.#start.elected(restored !== undefined)
    this.#leadership.role = 'leader'
    this.#leadership.leaderUrl = undefined
    this.metrics.isLeader.set(1)
    this.metrics.leaderChanges.inc({ to: 'leader' })
    if (restored === undefined) return this.#log.info('elected leader; learning what clients hold')
    const n = this.#restore(restored)
    this.#log.info({ entries: n }, 'elected leader; resumed from the ledger, no learning')
  }

  /**
   * Lost (or may have lost) leadership: stop granting at once, forget every
   * lease, and send each client to the leader, or away to retry when none is known.
   */
  stepDown(leaderUrl: string | undefined, reason: string): void {
    if (this.#closed) return
    const wasLeader = this.role === 'leader'
    this.#leadership.role = 'follower'
    this.#leadership.leaderUrl = leaderUrl
    this.#rounds.dropAll()
    this.#pool = this.#start.pool()
    this.#settings.clear()
    this.#central.closeAll()
    const sessions = this.#sessions.takeAll()
    this.metrics.connections.set(0)
    for (const session of sessions) this.#sendAway(session)
    this.metrics.isLeader.set(0)
    if (!wasLeader) return
    this.metrics.leaderChanges.inc({ to: 'follower' })
    this.#log.warn({ reason, leaderUrl, clients: sessions.length }, 'stepped down as leader')
  }

  /**
   * Fencing: from now on every message and every round first checks that
   * this replica still surely leads, and steps down if not, before anything
   * is granted.
   */
  fence(leadingUntilMs: () => number): void {
    this.#leadership.fence(leadingUntilMs)
  }

  /** Whether this replica may grant now; a leader past its deadline steps down here. */
  #mayGrant(): boolean {
    if (this.role !== 'leader') return false
    if (this.#leadership.leadsAt(this.#clock.now())) return true
    this.stepDown(undefined, 'leadership not confirmed in time (paused, or etcd unreachable)')
    return false
  }

  /** A follower learned who leads (undefined: nobody known). */
  setLeaderUrl(url: string | undefined): void {
    if (this.role === 'follower') this.#leadership.leaderUrl = url
  }

  #sendAway(session: SessionPort): void {
    this.#leadership.sendAway(session, (code, detail) => this.#fail(session, code, detail))
  }

  // ---- ledger and proofs ----

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
    this.#outbox.attach(ledger)
    this.#pool = this.#start.attached(ledger, restored !== undefined)
    if (restored === undefined) return
    const n = this.#restore(restored)
    this.#log.info({ ledger: ledger.kind, entries: n }, 'resumed from the ledger; no learning')
  }

  /** How this coordinator knows what clients hold: `ledger` (restored), `learning`, or `none` (no ledger). */
  get ledgerState(): { kind: string; started: 'restored' | 'learning' } {
    return {
      kind: this.#outbox.ledger?.kind ?? 'none',
      started: this.#start.restored ? 'restored' : 'learning',
    }
  }

  /** Resolves once no ledger write is in flight or queued (tests and orderly shutdown). */
  ledgerIdle(): Promise<void> {
    return this.#outbox.idle()
  }

  /**
   * The pool starts from a ledger's entries (`restoredUntilFor`); their resources' rounds start.
   * What the restore learned is written at once: every client is away now, so a concurrency
   * lease the ledger had pinned (its client connected) lapses a lease life from now, and says
   * so. Left to the first round's write, a second restart before it found the old pin and
   * counted the lease again from then (the pool model: 1 committed of a capacity cut to 0).
   */
  #restore(entries: readonly LedgerEntry[]): number {
    const n = this.#start.restore(this.#pool, entries)
    for (const id of this.#pool.resourceIds()) this.#rounds.ensure(id)
    this.#outbox.writeThenDeliver([])
    return n
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
    this.#rounds.prompt(resourceId)
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
    // A tenant's budget counts its processes' frames (their remote asks included), not the
    // coordinator's own part's (central.ts), whose reports those asks caused.
    if (
      session.tenant !== undefined &&
      session.internal === undefined &&
      !this.#tenantBudgets.tryTake(session.tenant, entriesOf(msg))
    )
      // A tenant asking more than its budget is refused its asks, not closed: a limiter refuses.
      // Up to as many again: past that it is a flood, and its connection is closed like any.
      return msg.type === 'decide' && this.#tenantRefusals.tryTake(session.tenant, msg.asks.length)
        ? this.refuseAsks(
            session,
            msg,
            this.#tenantBudgets.msUntil(session.tenant, msg.asks.length),
          )
        : this.#fail(
            session,
            'SLUICE_ERR_PROTO_RATE_LIMITED',
            `tenant ${session.tenant}: limits.maxEntriesPerSecPerTenant is ${this.limits.maxEntriesPerSecPerTenant}`,
          )
    if (msg.type === 'hello') {
      if (session.clientId !== undefined)
        return this.#fail(session, 'SLUICE_ERR_PROTO_UNEXPECTED', 'second hello')
      return hello(this.#core, session, msg)
    }
    if (session.clientId === undefined)
      return this.#fail(session, 'SLUICE_ERR_PROTO_UNEXPECTED', `${msg.type} before hello`)
    switch (msg.type) {
      case 'demand':
        demand(this.#core, session, msg)
        // A process that asks remotely: the central part holds its family (central.ts).
        for (const entry of msg.resources)
          if (entry.remote === true) this.#central.holdFor(session, entry.resource)
        return
      case 'ack':
        return ack(this.#core, session, msg)
      case 'release':
        return release(this.#core, session, msg)
      case 'decide':
        return this.#central.decide(session, msg)
    }
  }

  /**
   * Answers every ask of `msg` refused, to be asked again in `retryAfterMs` (past a budget).
   * The order rules of `receive` hold here too: a replica that may have lost leadership
   * redirects, and asks before a hello close the connection.
   */
  refuseAsks(session: SessionPort, msg: DecideMessage, retryAfterMs: number): void {
    if (!this.#mayGrant()) return this.#sendAway(session)
    if (session.clientId === undefined)
      return this.#fail(session, 'SLUICE_ERR_PROTO_UNEXPECTED', 'decide before hello')
    this.#central.refuse(session, msg, retryAfterMs)
  }

  /** The connection ended. Leases stay committed until they lapse. */
  disconnected(session: SessionPort): void {
    const clientId = session.clientId
    if (clientId === undefined || !this.#sessions.unbind(session)) return
    this.metrics.connections.set(this.#sessions.size)
    const key = clientKey(session.tenant, clientId)
    for (const id of this.#pool.disconnect(key, this.#clock.now())) this.#rounds.prompt(id)
    this.#outbox.writeThenDeliver([])
    this.#log.info({ clientId, tenant: session.tenant }, 'client disconnected')
  }

  #fail(session: SessionPort, code: ErrorCode, detail: string): void {
    this.metrics.errors.inc({ code })
    session.fail(code, detail)
  }

  // ---- config, rounds, close ----

  /** Applies a new config (already validated). Leases follow through the normal safe path. */
  applyConfig(config: Config): void {
    this.#settings.setConfig(new CompiledConfig(config))
    reapply(this.#core, config)
  }

  /**
   * Resets a keyed quota's key (its whole budget again for the rest of the window; a round of
   * the key follows) or a rate key (its holders' buckets full again), through the pool's safe
   * path (server/pool/reset.ts). The leader only.
   */
  resetKey(prefix: string, key: string): KeyResetOutcome | { readonly outcome: 'not-leader' } {
    if (!this.#mayGrant()) return { outcome: 'not-leader' }
    const { result, batches } = this.#pool.resetKey(prefix, key, this.#clock.now())
    this.#core.sendLeases(batches)
    if (result.outcome === 'pending') {
      const id = keyIdOf(prefix, key)
      this.#rounds.ensure(id)
      this.#rounds.prompt(id)
      this.#log.info({ family: familyIdOf(prefix), key, ...result }, 'key reset asked')
    } else if (result.outcome === 'refilled')
      this.#log.info({ family: familyIdOf(prefix), key, ...result }, 'key reset: buckets sent full')
    return result
  }

  /** Runs one round for a resource now. */
  runRound(resourceId: string): void {
    this.#rounds.run(resourceId)
  }

  close(): void {
    if (this.#closed) return
    this.#closed = true
    this.#central.closeAll()
    this.observer.close()
    this.#rounds.dropAll()
    for (const session of this.#sessions.takeAll())
      session.fail('SLUICE_ERR_SERVER_SHUTDOWN', 'coordinator closing')
  }

  /** What the coordinator's parts read and call of it (`Core`, `OutboxHost`): current at each read. */
  #makeCore(): Core & OutboxHost {
    return ((self: Coordinator): Core & OutboxHost => ({
      clock: self.#clock,
      log: self.#log,
      metrics: self.metrics,
      observer: self.observer,
      guard: self.guard,
      settings: self.#settings,
      settingsFor: self.#settings.lookup,
      sessions: self.#sessions,
      get config() {
        return self.#settings.config
      },
      get limits() {
        return self.limits
      },
      get pool() {
        return self.#pool
      },
      get rounds() {
        return self.#rounds
      },
      get closed() {
        return self.#closed
      },
      get keys() {
        return self.#keys
      },
      get ledgerId() {
        return self.#outbox.ledgerId
      },
      get restored() {
        return self.#start.restored
      },
      get learningLeftMs() {
        return self.#start.learningLeftMs
      },
      get maxWriteMs() {
        return self.config.server.ledgerMaxWriteMs
      },
      mayGrant: () => self.#mayGrant(),
      windowLagMs: () => self.#start.windowLagMs(),
      sendLeases: (batches) => self.#outbox.writeThenDeliver(batches),
      fail: (session, code, detail) => self.#fail(session, code, detail),
      distrustLedger: () => self.#start.distrusted(self.#pool),
      // A replica that cannot write what it grants (fenced, or etcd gone) may not lead.
      writeFailed: () => {
        if (self.#leadership.elected && self.role === 'leader')
          self.stepDown(undefined, 'ledger write failed')
      },
    }))(this)
  }
}
