import { randomBytes } from 'node:crypto'
import { EventEmitter } from 'node:events'
import { Connection } from './connection.js'
import type { FallHeld, HelloHolding, Holder } from './holder.js'
import { KeyedFamily, type KeyedOptions } from './keyed/index.js'
import { redirectRefusal } from './redirect.js'
import { RemoteDecisions, type RemoteAnswer } from './remote.js'
import {
  SluiceError,
  decodeServerMessage,
  describeIssues,
  describeValue,
  encodeMessage,
  familyIdOf,
  keyOfId,
  resourceId,
  closeCodeOf,
  domainLimits,
  internalCloseCode,
  protocolVersion,
  isErrorCode,
  type ClientMessage,
  type DemandEntry,
  type LeaseGrant,
  type LeaseMessage,
  type ServerMessage,
  type Clock,
  type Timer,
  CoarseClock,
  sharedCoarseClock,
  systemClock,
  libraryVersion,
} from '../shared/index.js'
import {
  resolveKeyedOptions,
  resolveResourceOptions,
  resolveClientOptions,
  type ClientOptions,
  type ResolvedClientOptions,
} from './options.js'
import { CoordinatorStamps } from './coordinator-stamps.js'
import { ReportTimes } from './report-times.js'
import { Resource, type ResourceOptions, type ResourceOwner } from './resource.js'

/** Refusals that stop a resource until the next connection. */
const refusesResource = new Set<string>([
  'SLUICE_ERR_RESOURCE_UNKNOWN',
  'SLUICE_ERR_RESOURCE_FORBIDDEN',
  'SLUICE_ERR_RESOURCE_KEYED',
  'SLUICE_ERR_AUTH_PRIORITY',
])

/** Released quotas whose use a client remembers (see #releasedQuotas). */
const maxReleasedQuotas = 4096

/** Remote checks out at once per client: more are refused at once, as a share would (RemoteDecisions). */
const maxRemoteInFlight = 10_000

/** No connection: a remote check is refused at once. */
const noAnswer: RemoteAnswer = Object.freeze({ admitted: false, retryAfterMs: 0 })

/** The events of a client: connected, disconnected (with the close code), and every error as a SluiceError. */
export interface ClientEvents {
  connect: []
  disconnect: [code: number]
  error: [error: SluiceError]
}

/**
 * A process's connection to the coordinator: one WebSocket, many resources.
 * Leases are kept right in the background; the hot path (`tryAcquire`) never
 * touches the network.
 *
 * The client is what is said on the connection (connection.ts keeps it up:
 * URLs, backoff, silence, fatal closes): the hello with what this process
 * holds, the demand reports, the leases and their acks, the releases. What
 * it holds is one list of holders (holder.ts): named resources and keyed
 * families, walked the same way for each of those.
 *
 * Liveness: the client hears the coordinator's pings and pings back when
 * it is quiet; a connection silent for 1.5 heartbeat periods (the
 * coordinator's `heartbeatMs`) is dead, so a dead connection is noticed
 * within two periods, closed, and replaced with backoff. While it cannot hear
 * the coordinator, each lease runs out by this process's own clock.
 *
 * Events: `connect`, `disconnect` (close code), `error` (a `SluiceError`: a
 * coded error message from the coordinator, or the session being taken over).
 */
export class SluiceClient extends EventEmitter<ClientEvents> implements ResourceOwner {
  readonly options: ResolvedClientOptions
  /** What this process holds leases for, by holder id: resources, and families by `<prefix>/*`. */
  readonly #holders = new Map<string, Holder>()
  /** The keyed families among the holders: a key's lease is found by its family's prefix. */
  readonly #families: KeyedFamily[] = []
  readonly #connection: Connection
  /** Resources released while no connection was up: released on the next one. */
  readonly #unreleased = new Set<string>()
  /**
   * Quotas released, with what they had used in their window: one taken up again starts from
   * it (Resource.carryUsed). At most maxReleasedQuotas, the oldest forgotten first.
   */
  readonly #releasedQuotas = new Map<string, { used: number; window: number }>()
  #reportTimer: Timer | undefined
  #reportPeriodMs: number
  #closed = false
  /**
   * Acks held back, per resource: the batch whose lease for it is in force but not yet
   * drained to (a concurrency decrease). Scoped to the connection they came on.
   */
  readonly #pendingAcks = new Map<string, number>()
  #clientId: string
  /** This process's nonce: a reconnect under the same id and instance keeps its leases. */
  readonly #instance = randomBytes(12).toString('base64url')
  /** The ledger the connected coordinator names in its welcome. */
  #welcomeLedger: string | undefined = undefined
  /** The ledger of the coordinator whose leases this process holds: told in the next hello. */
  #heldLedger: string | undefined = undefined
  /** Why this client stopped for good (a close no retry can fix), if it did. */
  #failure: SluiceError | undefined
  readonly #readyWaiters: { resolve: () => void; reject: (e: SluiceError) => void }[] = []
  #earlyBudget: number
  #earlyRequested = false
  /** The early report requested goes soon (`requestEarlyReport(true)`), not after the delay. */
  #earlySoon = false
  #earlyTimer: Timer | undefined
  /** Reports numbered so far (`demand.n`), and when the newest of them were sent (by n mod the ring). */
  #reportCount = 0
  readonly #reportSentAt = new ReportTimes()
  /** This connection's recent stamped lease batches: a next window's start placed from them. */
  readonly #stamps = new CoordinatorStamps()
  /** What every resource's `tryAcquire` reads: one coarse clock (one timer) for the client, or its clock. */
  readonly #hotClock: Clock
  /** Checks asked of the coordinator where a share could not decide (client/remote.ts). */
  readonly #remote: RemoteDecisions

  constructor(options: ClientOptions) {
    super()
    this.options = resolveClientOptions(options)
    // On the system clock every client shares one coarse clock (one timer for the process); an
    // injected clock gets its own, closed with the client.
    this.#hotClock =
      this.options.hotPathClock === 'precise'
        ? this.options.clock
        : this.options.clock === systemClock
          ? sharedCoarseClock(systemClock)
          : new CoarseClock(this.options.clock)
    this.#reportPeriodMs = this.options.refreshMs
    this.#earlyBudget = this.options.maxEarlyReportsPerRefresh
    this.#clientId = this.options.clientId
    this.#connection = new Connection(this.options, {
      hello: () => this.#hello(),
      message: (text) => this.#onMessage(text),
      closed: (code, wasWelcomed) => this.#onClose(code, wasWelcomed),
      replaced: () => this.#replaced(),
      fatal: (error) => this.#fail(error),
      surface: (error) => this.#surface(error),
      clientId: () => this.#clientId,
    })
    this.#remote = new RemoteDecisions(
      (asks) => this.#connection.sendSplit(asks, (part) => ({ type: 'decide', asks: part })),
      maxRemoteInFlight,
      this.options.clock,
      this.options.reconnectWaitMs,
    )
    this.#connection.start()
  }

  /** The id this process uses; a new one after another process took the old one over. */
  get clientId(): string {
    return this.#clientId
  }

  /** Whether the coordinator has welcomed this connection. */
  get connected(): boolean {
    return this.#connection.welcomed
  }

  /** Why this client stopped for good, when it did (a wrong token, a wrong URL…). */
  get failure(): SluiceError | undefined {
    return this.#failure
  }

  /**
   * Resolves once the coordinator has welcomed this client and every
   * resource made so far holds its first lease; rejects with the coded error
   * that stops it (a wrong token or URL, a refused resource) or, after
   * `timeoutMs`, with SLUICE_ERR_CLIENT_TIMEOUT saying what is missing.
   */
  async ready(options: { timeoutMs?: number | undefined } = {}): Promise<void> {
    if (this.#failure !== undefined) throw this.#failure
    const waitConnected = new Promise<void>((resolve, reject) => {
      if (this.connected) return resolve()
      this.#readyWaiters.push({ resolve, reject })
    })
    const all = (async () => {
      await waitConnected
      await Promise.all([...this.#holders.values()].map((h) => h.ready()))
    })()
    if (options.timeoutMs === undefined) return all
    let timer: Timer | undefined
    const timeout = new Promise<never>((_, reject) => {
      timer = this.options.clock.setTimeout(
        () =>
          reject(
            new SluiceError(
              'SLUICE_ERR_CLIENT_TIMEOUT',
              this.connected
                ? `not every resource had its first lease within ${options.timeoutMs} ms`
                : `no coordinator answered within ${options.timeoutMs} ms at ${this.options.urls.join(', ')}`,
            ),
          ),
        options.timeoutMs!,
      )
    })
    try {
      await Promise.race([all, timeout])
    } finally {
      timer?.cancel()
    }
  }

  /** The handle of a resource; the same one for the same id. */
  resource(id: string, options: ResourceOptions = {}): Resource {
    const held = this.#holders.get(id)
    if (held instanceof Resource) return held
    const valid = resourceId.safeParse(id)
    if (!valid.success || held !== undefined)
      throw new SluiceError(
        'SLUICE_ERR_RESOURCE_INVALID',
        `client.resource(${describeValue(id)}): ${valid.success ? 'the id of a keyed family of this client' : describeIssues(valid.error)}`,
      )
    // `<prefix>/*` is a keyed family's own id (a template), never a resource of its own.
    if (id.endsWith('/*'))
      throw new SluiceError(
        'SLUICE_ERR_RESOURCE_INVALID',
        `client.resource(${describeValue(id)}): ${describeValue(id)} is a keyed family's template; for a limit per key use client.keyed('${id.slice(0, -2)}')`,
      )
    const resolved = resolveResourceOptions(id, options)
    if (resolved.failureMode === 'optimistic')
      this.options.logger?.warn(
        { resource: id },
        'sluice: failureMode optimistic may admit beyond the cluster-wide capacity while the coordinator is unreachable',
      )
    const r = new Resource(id, resolved, this.options.clock, this, this.#hotClock)
    const released = this.#releasedQuotas.get(id)
    if (released !== undefined) {
      r.carryUsed(released.used, released.window)
      this.#releasedQuotas.delete(id)
    }
    this.#hold(r)
    return r
  }

  /**
   * The handle of a keyed family (`prefix` is its template's match without
   * `/*`: `client.keyed('apikey')` for `apikey/*`); the same one for the same
   * prefix. Every key is a limit of its own, across every process.
   */
  keyed(prefix: string, options: KeyedOptions = {}): KeyedFamily {
    const familyId = familyIdOf(prefix)
    const held = this.#holders.get(familyId)
    if (held instanceof KeyedFamily) return held
    const valid = resourceId.safeParse(familyId)
    if (!valid.success || prefix === '' || /[*?[]/.test(prefix) || held !== undefined)
      throw new SluiceError(
        'SLUICE_ERR_RESOURCE_INVALID',
        `client.keyed(${describeValue(prefix)}): a family's prefix, e.g. 'apikey' for the template apikey/*${valid.success ? (held === undefined ? ', without *, ? or [' : `, not the id of a resource of this client`) : `: ${describeIssues(valid.error)}`}`,
      )
    const f = new KeyedFamily(
      prefix,
      resolveKeyedOptions(prefix, options),
      this.options.clock,
      this.#hotClock,
      this,
    )
    this.#families.push(f)
    this.#hold(f)
    return f
  }

  #hold(holder: Holder): void {
    this.#holders.set(holder.holderId, holder)
    this.#scheduleReports()
    // Tell the coordinator at once, so the first lease does not wait a whole period.
    if (this.connected) this.#report(false)
  }

  /** The holder a lease of `id` is for: a resource, a family, or the family of a key. */
  #holderOf(id: string): Holder | undefined {
    return this.#holders.get(id) ?? this.#families.find((f) => f.holds(id))
  }

  /** Resolves once the coordinator has answered a ping: all it sent before has arrived. For tests and diagnostics. */
  roundTrip(): Promise<void> {
    return this.#connection.roundTrip()
  }

  /** Releases every lease, closes the connection and rejects waiting callers. */
  async close(): Promise<void> {
    if (this.#closed) return
    this.#closed = true
    this.#reportTimer?.cancel()
    this.#earlyTimer?.cancel()
    if (this.connected) {
      const ids = [...this.#holders.values()].flatMap((h) => h.leasedIds())
      // A keyed quota's share goes with what it spent of each key, so it may be handed on
      // rather than stay spent to the window's end; alone in its frame, or not at all.
      for (const family of this.#families) {
        const spent = family.spentInWindow()
        if (spent === undefined || !ids.includes(spent.resource)) continue
        const text = encodeMessage({ type: 'release', resources: [spent.resource], spent: [spent] })
        if (Buffer.byteLength(text) > this.options.maxFrameBytes) continue
        this.#connection.sendText(text)
        ids.splice(ids.indexOf(spent.resource), 1)
      }
      // A rate family's share goes with what it still holds of each key, so that the process
      // that takes it over starts its keys from that, not empty; and with the keys leased on
      // their own, so that it takes their shares too rather than the others (held-handover.ts).
      // Alone in its frame (without the keys if they make it too large), or not at all.
      for (const family of this.#families) {
        const held = family.heldAtClose()
        if (held === undefined || !ids.includes(held.resource)) continue
        const keyIds = family
          .leasedIds()
          .filter((id) => id !== held.resource && ids.includes(id))
          .slice(0, domainLimits.maxEntries - 1)
        let text = encodeMessage({
          type: 'release',
          resources: [held.resource, ...keyIds],
          held: [held],
        })
        if (Buffer.byteLength(text) > this.options.maxFrameBytes) {
          keyIds.length = 0
          text = encodeMessage({ type: 'release', resources: [held.resource], held: [held] })
        }
        if (Buffer.byteLength(text) > this.options.maxFrameBytes) continue
        this.#connection.sendText(text)
        for (const id of [held.resource, ...keyIds]) ids.splice(ids.indexOf(id), 1)
      }
      // A named quota, and a keyed quota's key leased on its own, says what it used of its
      // window: the rest of its block comes back.
      const used = new Map<string, { resource: string; window: number; used: number }>()
      for (const h of this.#holders.values()) {
        const u = h instanceof Resource ? h.usedAtClose() : undefined
        if (u !== undefined) used.set(h.holderId, { resource: h.holderId, ...u })
      }
      for (const family of this.#families)
        for (const u of family.keyLeasesUsed()) used.set(u.resource, u)
      // Split by what each id adds to the frame, its use included.
      const items = ids.map((id) => ({ id, spent: used.get(id) }))
      this.#connection.sendSplit(items, (part) => {
        const resources = part.map((x) => x.id)
        const spent = part.flatMap((x) => x.spent ?? [])
        return spent.length === 0
          ? { type: 'release', resources }
          : { type: 'release', resources, spent }
      })
    }
    for (const h of this.#holders.values()) h.close()
    this.#remote.dropAll()
    if (this.#hotClock instanceof CoarseClock && this.options.clock !== systemClock)
      this.#hotClock.close()
    for (const w of this.#readyWaiters.splice(0))
      w.reject(new SluiceError('SLUICE_ERR_CLIENT_CLOSED', 'client closed'))
    await this.#connection.close()
  }

  // ---- ResourceOwner ----

  askRemote(resource: string, cost: number): Promise<RemoteAnswer> {
    // Without a connection, the ask waits for one (reconnectWaitMs: client/remote.ts).
    if (this.#closed) return Promise.resolve(noAnswer)
    return this.#remote.ask(resource, cost)
  }

  requestEarlyReport(soon = false): void {
    // Cheap when nothing is due: the hot path's failure branch calls this.
    if (this.#earlyRequested && (!soon || this.#earlySoon)) return
    if (this.#earlyBudget <= 0 || !this.connected) return
    this.#earlyTimer?.cancel()
    this.#earlyTimer = undefined
    this.#earlyRequested = true
    this.#earlySoon = soon
    // Soon: nothing to wait for (a key just leased here unasked: the coordinator keeps its
    // seeded lease until it hears of it), so once the batch that brought it is applied, right
    // behind its ack, not after the usual delay, which lets asking accumulate.
    if (soon) queueMicrotask(() => this.#earlyReport())
    else
      this.#earlyTimer = this.options.clock.setTimeout(
        () => this.#earlyReport(),
        Math.max(1, this.#reportPeriodMs / (this.options.maxEarlyReportsPerRefresh + 1)),
      )
  }

  /** The early report requested, if one is still due and some holder wishes it. */
  #earlyReport(): void {
    if (!this.#earlyRequested) return
    this.#earlyRequested = false
    this.#earlySoon = false
    this.#earlyTimer = undefined
    let throttled = false
    for (const h of this.#holders.values())
      if (
        h instanceof Resource
          ? h.throttled(this.#reportPeriodMs)
          : h.takeEarlyReportWish?.() === true
      )
        throttled = true
    if (throttled && this.#earlyBudget > 0) {
      this.#earlyBudget--
      this.#report(true)
    }
  }

  drained(): void {
    if (this.#pendingAcks.size === 0) return
    // Each resource's ack goes as soon as that resource fits its lease; never one for another.
    const ready = new Map<number, string[]>()
    for (const [id, seq] of this.#pendingAcks) {
      const holder = this.#holderOf(id)
      if (holder !== undefined && !holder.fitsFor(id)) continue
      this.#pendingAcks.delete(id)
      const list = ready.get(seq)
      if (list === undefined) ready.set(seq, [id])
      else list.push(id)
    }
    for (const [seq, resources] of ready)
      this.#connection.sendSplit(resources, (part) => ({ type: 'ack', seq, resources: part }))
  }

  releaseResource(id: string): void {
    const r = this.#holders.get(id)
    if (!(r instanceof Resource)) return
    this.#holders.delete(id)
    this.#pendingAcks.delete(id)
    const used = r.usedInWindow()
    if (used !== undefined && used.used > 0) {
      if (this.#releasedQuotas.size >= maxReleasedQuotas)
        this.#releasedQuotas.delete(this.#releasedQuotas.keys().next().value!)
      this.#releasedQuotas.set(id, used)
    }
    r.close()
    // Not what it used: a lease of it still on its way may be put in force on a handle of it
    // taken up again here, so its block stays spent (close() says what was used: no lease
    // reaches a closed connection).
    if (this.connected) this.#send({ type: 'release', resources: [id] })
    // Said on the next connection, before any report: the same process coming back keeps its
    // leases there, and a quota taken up again here starts with nothing used.
    else this.#unreleased.add(id)
  }

  // ---- what is said on the connection ----

  /**
   * The hello: who this is, and what it may enforce now (for a learning
   * coordinator). One message carries at most maxEntries, within
   * maxFrameBytes: resources and family shares first, then the keys' own
   * leases. A lease left out is not learnt, and it lapses before a learning
   * coordinator grants anything new (a restored one knows it from its ledger).
   */
  #hello(): ClientMessage {
    const holdings: HelloHolding[] = []
    const keyHoldings: HelloHolding[] = []
    for (const holder of this.#holders.values())
      for (const h of holder.helloHoldings())
        (h.resource === holder.holderId ? holdings : keyHoldings).push(h)
    let bytes = 2048 + Buffer.byteLength(JSON.stringify(holdings))
    for (const h of keyHoldings) {
      if (holdings.length >= domainLimits.maxEntries) break
      bytes += Buffer.byteLength(JSON.stringify(h)) + 1
      if (bytes > this.options.maxFrameBytes) break
      holdings.push(h)
    }
    return {
      type: 'hello',
      v: protocolVersion,
      clientId: this.#clientId,
      instance: this.#instance,
      name: this.options.name,
      library: `sluice/${libraryVersion}`,
      ...(this.options.token === undefined ? {} : { token: this.options.token }),
      ...(holdings.length === 0
        ? {}
        : { holdings, ...(this.#heldLedger === undefined ? {} : { ledger: this.#heldLedger }) }),
    }
  }

  #onClose(code: number, wasWelcomed: boolean): void {
    this.#pendingAcks.clear()
    this.#remote.down()
    if (wasWelcomed) this.emit('disconnect', code)
  }

  #onMessage(text: string): void {
    const decoded = decodeServerMessage(text)
    if (!decoded.ok) {
      this.options.logger?.warn(
        { detail: decoded.detail },
        'sluice: coordinator sent an invalid message',
      )
      return
    }
    const msg = decoded.message
    switch (msg.type) {
      case 'welcome':
        return this.#onWelcome(msg)
      case 'lease':
        return this.#onLease(msg)
      case 'error':
        return this.#onError(msg)
      case 'decided':
        return this.#remote.answered(msg)
      case 'redirect': {
        const refusal = redirectRefusal(this.#connection.url, msg.url, this.options.redirectTo)
        if (refusal === undefined) return this.#connection.redirect(msg.url)
        this.#surface(new SluiceError('SLUICE_ERR_CLIENT_REDIRECT', refusal))
        this.#connection.dropCurrent()
        return
      }
    }
  }

  #onWelcome(msg: Extract<ServerMessage, { type: 'welcome' }>): void {
    this.#welcomeLedger = msg.ledger
    this.#stamps.reset()
    this.#connection.welcome(msg.heartbeatMs)
    // A resource refused on an earlier connection is asked for once more (the config may have
    // changed since).
    for (const h of this.#holders.values()) h.connected(msg.learningMs > 0)
    // The remote checks that waited for a connection leave, after the hello's holdings.
    this.#remote.up()
    this.emit('connect')
    for (const w of this.#readyWaiters.splice(0)) w.resolve()
    if (this.#unreleased.size > 0) {
      this.#connection.sendSplit([...this.#unreleased], (resources) => ({
        type: 'release',
        resources,
      }))
      this.#unreleased.clear()
    }
    this.#report(false)
  }

  #onError(msg: Extract<ServerMessage, { type: 'error' }>): void {
    // The close that follows says it better (with the fresh id): see #replaced.
    if (msg.code === 'SLUICE_ERR_SESSION_REPLACED') return
    const error = SluiceError.fromWire(msg.code, msg.message, msg.resource)
    // A resource the coordinator refuses for good is not asked for again on this connection.
    if (msg.resource !== undefined && refusesResource.has(msg.code))
      for (const id of msg.resources ?? [msg.resource])
        this.#holders
          .get(id)
          ?.refuse(id === msg.resource ? error : SluiceError.fromWire(msg.code, msg.message, id))
    // A key the coordinator will not lease on its own now stays at the default share: quiet.
    if (msg.code === 'SLUICE_ERR_LIMIT_RESOURCES') {
      let keys = 0
      const ids = msg.resources ?? (msg.resource === undefined ? [] : [msg.resource])
      for (const id of ids) {
        for (const family of this.#families) {
          const key = keyOfId(family.prefix, id)
          if (key === undefined) continue
          family.quietKey(key)
          keys++
          break
        }
      }
      if (keys > 0 && keys === ids.length) return
    }
    // A close follows the errors that end the connection: the connection surfaces those.
    if (
      isErrorCode(msg.code) &&
      closeCodeOf(msg.code) !== internalCloseCode &&
      msg.resource === undefined
    )
      return
    this.#surface(error)
  }

  #onLease(msg: LeaseMessage): void {
    this.#heldLedger = this.#welcomeLedger
    // Each lease is acknowledged on its own: at once when in force, or (a concurrency decrease)
    // once in-flight work fits it. A held-back ack never holds back, nor is implied by, another.
    let held = 0
    const ready: string[] = []
    /** What falls of this batch gave up (an ack's `gave`): the coordinator may hand it on. */
    let gave: [string, number][] | undefined
    /** What rate families' default shares that fell for a joiner held (an ack's `held`). */
    let fallHeld: FallHeld[] | undefined
    let period = Infinity
    const receivedMs = this.options.clock.now()
    if (msg.at !== undefined) this.#stamps.note(receivedMs, msg.at)
    for (const leased of msg.leases) {
      const grant = this.#onOwnClock(leased, msg.at, receivedMs)
      period = Math.min(period, grant.refreshMs)
      const holder = this.#holderOf(grant.resource)
      // A lease of what this process no longer holds needs nothing but its ack.
      const inForce = holder === undefined || holder.applyLeaseOf(grant.resource, grant)
      const given = holder?.takeGave?.(grant.resource) ?? 0
      if (given > 0) (gave ??= []).push([grant.resource, given])
      const fallen = holder?.takeFallHeld?.(grant.resource)
      if (fallen !== undefined) (fallHeld ??= []).push(fallen)
      if (inForce) {
        // An older lease's held-back ack is void once a newer one is in force.
        this.#pendingAcks.delete(grant.resource)
        ready.push(grant.resource)
      } else {
        this.#pendingAcks.set(grant.resource, msg.seq)
        held++
      }
    }
    if (Number.isFinite(period) && period !== this.#reportPeriodMs) {
      this.#reportPeriodMs = period
      this.#reportTimer?.cancel()
      this.#reportTimer = undefined
      this.#scheduleReports()
    }
    if (held === 0)
      this.#send({
        type: 'ack',
        seq: msg.seq,
        ...(gave === undefined ? {} : { gave }),
        ...(fallHeld === undefined ? {} : { held: fallHeld }),
      })
    else if (ready.length > 0)
      this.#connection.sendSplit(ready, (resources) => ({ type: 'ack', seq: msg.seq, resources }))
  }

  /**
   * A quota lease whose window's end is measured from one of this process's reports (`edge`):
   * spent until that end on this process's clock (the report was sent before the coordinator
   * handled it, so no delay can carry it past the window's end), rather than `endsInMs` after
   * the lease came (`windowGraceMs` early, safe only while a lease's one-way delay is shorter).
   */
  #onOwnClock(grant: LeaseGrant, atMs: number | undefined, receivedMs: number): LeaseGrant {
    const w = grant.window
    if (w === undefined) return grant
    const next = w.next
    const endsInMs = this.#placedEnd(w.edge, w.endsInMs)
    const nextEndsInMs = next === undefined ? 0 : this.#placedEnd(next.edge, next.endsInMs)
    if (next === undefined && endsInMs === w.endsInMs) return grant
    // A next window opens no sooner than its batch places it, nor than an earlier, quicker
    // batch of this connection does (client/coordinator-stamps.ts): its delay is not paid twice.
    const placedNext =
      next === undefined
        ? {}
        : {
            next: {
              ...next,
              startsInMs:
                atMs === undefined
                  ? next.startsInMs
                  : this.#stamps.placeAfter(atMs, receivedMs, next.startsInMs),
              endsInMs: nextEndsInMs,
            },
          }
    return {
      ...grant,
      // With a next window sent ahead, the lease lasts until that window's end: its budget is
      // spent from that window's start (the enforcer keeps each window's budget to its window).
      ttlMs: Math.max(0, grant.ttlMs + endsInMs - w.endsInMs, nextEndsInMs),
      window: {
        ...w,
        endsInMs,
        ...placedNext,
      },
    }
  }

  /** A window's end from now on this process's clock: from report `edge[0]`'s sending, or as said. */
  #placedEnd(edge: readonly [number, number] | undefined, endsInMs: number): number {
    if (edge === undefined) return endsInMs
    const sentAtMs = this.#reportSentAt.get(edge[0])
    if (sentAtMs === undefined) return endsInMs
    return Math.max(0, Math.floor(sentAtMs + edge[1] - this.options.clock.now()))
  }

  /**
   * Another process took our client id over (4409). Whatever this process
   * was leased may now be counted as that one's: stop enforcing it at once
   * (capacity 0 until a new lease), and come back under a fresh id.
   */
  #replaced(): void {
    for (const h of this.#holders.values()) h.revoke()
    const previous = this.#clientId
    this.#clientId = `${this.options.clientId.slice(0, 200)}-${randomBytes(6).toString('base64url')}`
    const error = new SluiceError(
      'SLUICE_ERR_SESSION_REPLACED',
      `client id ${JSON.stringify(previous)} was taken by another process; leases dropped, reconnecting as ${JSON.stringify(this.#clientId)}`,
    )
    if (this.listenerCount('error') > 0) this.emit('error', error)
    else this.options.logger?.warn({ code: error.code }, error.message)
  }

  #scheduleReports(): void {
    if (this.#reportTimer !== undefined || this.#closed) return
    this.#reportTimer = this.options.clock
      .setInterval(() => {
        this.#earlyBudget = this.options.maxEarlyReportsPerRefresh
        this.#report(false)
      }, this.#reportPeriodMs)
      .unref()
  }

  #report(early: boolean): void {
    if (!this.connected || this.#holders.size === 0) return
    const resources: DemandEntry[] = []
    for (const h of this.#holders.values())
      if (h.refused === undefined) for (const entry of h.reportEntries()) resources.push(entry)
    // A process with more hot keys than one message may carry (in entries or in bytes)
    // reports them in several (the usual report, within the bounds, goes as it is: no copy).
    this.#connection.sendSplit(resources, (part) => {
      // Numbered, and its sending noted before it goes (earlier than it leaves: on the safe side).
      const n = ++this.#reportCount
      const at = this.options.clock.now()
      this.#reportSentAt.set(n, at)
      return { type: 'demand', resources: part, ...(early ? { early: true } : {}), n, at }
    })
  }

  /** Stops for good (the connection already has): ready() and every resource's ready() reject. */
  #fail(error: SluiceError): void {
    this.#failure = error
    this.#reportTimer?.cancel()
    this.#remote.dropAll()
    for (const w of this.#readyWaiters.splice(0)) w.reject(error)
    for (const h of this.#holders.values()) h.refuse(error)
    this.#surface(error)
  }

  /**
   * Says what went wrong where the user will see it: the `error` event when
   * someone listens, else the logger, else a process warning (never a throw).
   */
  #surface(error: SluiceError): void {
    if (this.listenerCount('error') > 0) this.emit('error', error)
    else if (this.options.logger !== undefined)
      this.options.logger.warn({ code: error.code, resource: error.resource }, error.message)
    else process.emitWarning(error.message, { code: error.code })
  }

  #send(message: ClientMessage): void {
    this.#connection.send(message)
  }
}

/** Connects to a coordinator; resources are added with `client.resource(id, options)`. */
export function createClient(options: ClientOptions): SluiceClient {
  return new SluiceClient(options)
}
