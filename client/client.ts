import { randomBytes } from 'node:crypto'
import { EventEmitter } from 'node:events'
import { KeyedFamily, type KeyedOptions } from './keyed/index.js'
import { redirectRefusal } from './redirect.js'
import { socketStates, type ClientSocket } from './socket.js'
import {
  SluiceError,
  backoffDelayMs,
  bearerHeader,
  decodeServerMessage,
  describeIssues,
  describeValue,
  familyIdOf,
  keyOfId,
  resourceId,
  encodeMessage,
  clampQuantity,
  closeCodeOf,
  domainLimits,
  internalCloseCode,
  protocolVersion,
  codeOfClose,
  errorCatalogue,
  isErrorCode,
  type ClientMessage,
  type LeaseGrant,
  type LeaseMessage,
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
import { Resource, type ResourceOptions, type ResourceOwner } from './resource.js'

/** Refusals that stop a resource until the next connection. */
const refusesResource = new Set<string>([
  'SLUICE_ERR_RESOURCE_UNKNOWN',
  'SLUICE_ERR_RESOURCE_FORBIDDEN',
  'SLUICE_ERR_AUTH_PRIORITY',
])

/** Retryable trouble (a coordinator not reachable) is surfaced at most this often, ms. */
const troubleEveryMs = 30_000

/**
 * A process's connection to the coordinator: one WebSocket, many resources.
 * Leases are kept right in the background; the hot path (`tryAcquire`) never
 * touches the network.
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
/** The events of a client: connected, disconnected (with the close code), and every error as a SluiceError. */
export interface ClientEvents {
  connect: []
  disconnect: [code: number]
  error: [error: SluiceError]
}

/**
 * How long a connection must have lasted for its close to start the
 * reconnect backoff over, ms: a close sooner than this (the coordinator
 * refusing what the process sends at once, every time) keeps the backoff
 * growing, so such a loop slows to one attempt per `backoffCapMs`.
 */
const stableConnectionMs = 10_000

/** Released quotas whose use a client remembers (see #releasedQuotas). */
const maxReleasedQuotas = 4096

export class SluiceClient extends EventEmitter<ClientEvents> implements ResourceOwner {
  readonly options: ResolvedClientOptions
  readonly #resources = new Map<string, Resource>()
  /** Keyed families, by their own resource id (`<prefix>/*`). */
  readonly #families = new Map<string, KeyedFamily>()
  /** Resources released while no connection was up: released on the next one. */
  readonly #unreleased = new Set<string>()
  /**
   * Quotas released, with what they had used in their window: one taken up again starts from
   * it (Resource.carryUsed). At most maxReleasedQuotas, the oldest forgotten first.
   */
  readonly #releasedQuotas = new Map<string, { used: number; window: number }>()
  #ws: ClientSocket | undefined
  #urlIndex = 0
  #redirectUrl: string | undefined
  /** The URL of the connection in hand (a redirect is judged against it). */
  #url = ''
  /** Redirects followed since the last welcome; past a few, they wait a backoff like any retry. */
  #redirects = 0
  #attempt = 0
  /** When the connection in hand was welcomed (a close soon after does not reset the backoff). */
  #welcomedAtMs = -Infinity
  #reconnectTimer: Timer | undefined
  #reportTimer: Timer | undefined
  #reportPeriodMs: number
  #connected = false
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
  #heartbeatTimer: Timer | undefined
  #lastHeardMs = 0
  /** Why this client stopped for good (a close no retry can fix), if it did. */
  #failure: SluiceError | undefined
  /** The transport's last error on the current connection (e.g. an HTTP answer to the upgrade). */
  #lastSocketError: Error | undefined
  /** When retryable trouble was last surfaced: at most once per `troubleEveryMs`. */
  #lastTroubleMs = -Infinity
  readonly #readyWaiters: { resolve: () => void; reject: (e: SluiceError) => void }[] = []
  #earlyBudget: number
  #earlyRequested = false
  #earlyTimer: Timer | undefined
  /** What every resource's `tryAcquire` reads: one coarse clock (one timer) for the client, or its clock. */
  readonly #hotClock: Clock

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
    this.#connect()
  }

  /** The id this process uses; a new one after another process took the old one over. */
  get clientId(): string {
    return this.#clientId
  }

  /** Whether the coordinator has welcomed this connection. */
  get connected(): boolean {
    return this.#connected
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
      if (this.#connected) return resolve()
      this.#readyWaiters.push({ resolve, reject })
    })
    const all = (async () => {
      await waitConnected
      await Promise.all([
        ...[...this.#resources.values()].map((r) => r.ready()),
        ...[...this.#families.values()].map((f) => f.ready()),
      ])
    })()
    if (options.timeoutMs === undefined) return all
    let timer: Timer | undefined
    const timeout = new Promise<never>((_, reject) => {
      timer = this.options.clock.setTimeout(
        () =>
          reject(
            new SluiceError(
              'SLUICE_ERR_CLIENT_TIMEOUT',
              this.#connected
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
    let r = this.#resources.get(id)
    if (r === undefined) {
      const valid = resourceId.safeParse(id)
      if (!valid.success)
        throw new SluiceError(
          'SLUICE_ERR_RESOURCE_INVALID',
          `client.resource(${describeValue(id)}): ${describeIssues(valid.error)}`,
        )
      const resolved = resolveResourceOptions(id, options)
      if (resolved.failureMode === 'optimistic')
        this.options.logger?.warn(
          { resource: id },
          'sluice: failureMode optimistic may admit beyond the cluster-wide capacity while the coordinator is unreachable',
        )
      r = new Resource(id, resolved, this.options.clock, this, this.#hotClock)
      const released = this.#releasedQuotas.get(id)
      if (released !== undefined) {
        r.carryUsed(released.used, released.window)
        this.#releasedQuotas.delete(id)
      }
      this.#resources.set(id, r)
      this.#scheduleReports()
      // Tell the coordinator at once, so the first lease does not wait a whole period.
      if (this.#connected) this.#report(false)
    }
    return r
  }

  /**
   * The handle of a keyed family (`prefix` is its template's match without
   * `/*`: `client.keyed('apikey')` for `apikey/*`); the same one for the same
   * prefix. Every key is a limit of its own, across every process.
   */
  keyed(prefix: string, options: KeyedOptions = {}): KeyedFamily {
    const familyId = familyIdOf(prefix)
    let f = this.#families.get(familyId)
    if (f === undefined) {
      const valid = resourceId.safeParse(familyId)
      if (!valid.success || prefix === '' || /[*?[]/.test(prefix))
        throw new SluiceError(
          'SLUICE_ERR_RESOURCE_INVALID',
          `client.keyed(${describeValue(prefix)}): a family's prefix, e.g. 'apikey' for the template apikey/*${valid.success ? ', without *, ? or [' : `: ${describeIssues(valid.error)}`}`,
        )
      f = new KeyedFamily(
        prefix,
        resolveKeyedOptions(prefix, options),
        this.options.clock,
        this.#hotClock,
        this,
      )
      this.#families.set(familyId, f)
      this.#scheduleReports()
      if (this.#connected) this.#report(false)
    }
    return f
  }

  /** The family whose key `id` is (`<prefix>/<key>`), with the key. */
  #familyOfKey(id: string): { family: KeyedFamily; key: string } | undefined {
    for (const family of this.#families.values()) {
      const key = keyOfId(family.prefix, id)
      if (key !== undefined) return { family, key }
    }
    return undefined
  }

  /** Resolves once the coordinator has answered a ping: all it sent before has arrived. For tests and diagnostics. */
  roundTrip(): Promise<void> {
    const ws = this.#ws
    if (ws === undefined || ws.readyState !== socketStates.open) return Promise.resolve()
    return new Promise((resolve) => {
      const done = (): void => {
        ws.off('pong', done)
        ws.off('close', done)
        resolve()
      }
      ws.on('pong', done)
      ws.on('close', done)
      ws.ping()
    })
  }

  /** Releases every lease, closes the connection and rejects waiting callers. */
  async close(): Promise<void> {
    if (this.#closed) return
    this.#closed = true
    this.#reconnectTimer?.cancel()
    this.#reportTimer?.cancel()
    this.#earlyTimer?.cancel()
    this.#heartbeatTimer?.cancel()
    const ws = this.#ws
    if (ws !== undefined && ws.readyState === socketStates.open && this.#connected) {
      this.#sendSplit(
        [...this.#resources.keys(), ...[...this.#families.values()].flatMap((f) => f.leasedIds())],
        (resources) => ({ type: 'release', resources }),
      )
    }
    for (const r of this.#resources.values()) r.close()
    for (const f of this.#families.values()) f.close()
    if (this.#hotClock instanceof CoarseClock && this.options.clock !== systemClock)
      this.#hotClock.close()
    for (const w of this.#readyWaiters.splice(0))
      w.reject(new SluiceError('SLUICE_ERR_CLIENT_CLOSED', 'client closed'))
    if (ws !== undefined && ws.readyState !== socketStates.closed) {
      await new Promise<void>((resolve) => {
        ws.once('close', () => resolve())
        ws.close(1000)
      })
    }
  }

  // ---- ResourceOwner ----

  requestEarlyReport(): void {
    // Cheap when nothing is due: the hot path's failure branch calls this.
    if (this.#earlyRequested || this.#earlyBudget <= 0 || !this.#connected) return
    this.#earlyRequested = true
    this.#earlyTimer = this.options.clock.setTimeout(
      () => {
        this.#earlyRequested = false
        this.#earlyTimer = undefined
        let throttled = false
        for (const r of this.#resources.values()) if (r.throttled()) throttled = true
        if (throttled && this.#earlyBudget > 0) {
          this.#earlyBudget--
          this.#report(true)
        }
      },
      Math.max(1, this.#reportPeriodMs / (this.options.maxEarlyReportsPerRefresh + 1)),
    )
  }

  drained(): void {
    if (this.#pendingAcks.size === 0) return
    // Each resource's ack goes as soon as that resource fits its lease; never one for another.
    const ready = new Map<number, string[]>()
    for (const [id, seq] of this.#pendingAcks) {
      if (!this.#fits(id)) continue
      this.#pendingAcks.delete(id)
      const list = ready.get(seq)
      if (list === undefined) ready.set(seq, [id])
      else list.push(id)
    }
    for (const [seq, resources] of ready)
      this.#sendSplit(resources, (part) => ({ type: 'ack', seq, resources: part }))
  }

  /** Whether what is in use of `id` fits its lease now (a held-back ack may go). */
  #fits(id: string): boolean {
    const r = this.#resources.get(id)
    if (r !== undefined) return r.drainedToLimit
    const family = this.#families.get(id)
    if (family !== undefined) return family.fits()
    const keyed = this.#familyOfKey(id)
    return keyed === undefined || keyed.family.keyFits(keyed.key)
  }

  releaseResource(id: string): void {
    const r = this.#resources.get(id)
    if (r === undefined) return
    this.#resources.delete(id)
    this.#pendingAcks.delete(id)
    const used = r.usedInWindow()
    if (used !== undefined && used.used > 0) {
      if (this.#releasedQuotas.size >= maxReleasedQuotas)
        this.#releasedQuotas.delete(this.#releasedQuotas.keys().next().value!)
      this.#releasedQuotas.set(id, used)
    }
    r.close()
    if (this.#connected) this.#send({ type: 'release', resources: [id] })
    // Said on the next connection, before any report: the same process coming back keeps its
    // leases there, and a quota taken up again here starts with nothing used.
    else this.#unreleased.add(id)
  }

  // ---- connection ----

  #connect(): void {
    if (this.#closed) return
    const url = this.#redirectUrl ?? this.options.urls[this.#urlIndex % this.options.urls.length]!
    this.#redirectUrl = undefined
    this.#url = url
    this.#lastSocketError = undefined
    const headers: Record<string, string> = {}
    if (this.options.token !== undefined) headers.authorization = bearerHeader(this.options.token)
    const ws = this.options.socketFactory(url, headers, this.options.tls)
    this.#ws = ws
    // Until the welcome, the connect timeout is the bound: a handshake into a black hole ends.
    this.#watch(ws, this.options.connectTimeoutMs, 'no welcome in time')
    ws.on('open', () => {
      const holdings = []
      const keyHoldings: ReturnType<KeyedFamily['holdings']> = []
      for (const r of this.#resources.values()) {
        const h = r.holding()
        if (h !== undefined) holdings.push(h)
      }
      for (const f of this.#families.values())
        for (const h of f.holdings()) (h.resource === f.familyId ? holdings : keyHoldings).push(h)
      // One message carries at most maxEntries, within maxFrameBytes: resources and family
      // shares first, then the keys' own leases. A lease left out is not learnt, and it lapses
      // before a learning coordinator grants anything new (a restored one knows it from its
      // ledger).
      let bytes = 2048 + Buffer.byteLength(JSON.stringify(holdings))
      for (const h of keyHoldings) {
        if (holdings.length >= domainLimits.maxEntries) break
        bytes += Buffer.byteLength(JSON.stringify(h)) + 1
        if (bytes > this.options.maxFrameBytes) break
        holdings.push(h)
      }
      this.#send({
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
      })
    })
    ws.on('message', (data: Buffer | string) => {
      this.#heard()
      this.#onMessage(typeof data === 'string' ? data : data.toString('utf8'))
    })
    ws.on('ping', () => this.#heard())
    ws.on('pong', () => this.#heard())
    ws.on('error', (error) => {
      this.#lastSocketError = error
      this.options.logger?.debug({ err: error, url }, 'sluice connection error')
    })
    ws.on('close', (code) => this.#onClose(ws, code))
  }

  /**
   * Declares `ws` dead when nothing is heard on it for `silenceMs`: checked
   * every third of that, and the quiet side pings, so a dead connection is
   * noticed within `silenceMs` plus a third.
   */
  #watch(ws: ClientSocket, silenceMs: number, why: string): void {
    this.#heartbeatTimer?.cancel()
    this.#lastHeardMs = this.options.clock.now()
    const stepMs = Math.max(1, Math.floor(silenceMs / 3))
    this.#heartbeatTimer = this.options.clock
      .setInterval(() => {
        if (ws !== this.#ws || ws.readyState >= socketStates.closing) return
        const quietMs = this.options.clock.now() - this.#lastHeardMs
        if (quietMs >= silenceMs) {
          this.options.logger?.warn(
            { quietMs: Math.round(quietMs), clientId: this.#clientId },
            `sluice: connection to the coordinator is dead (${why}); reconnecting`,
          )
          ws.terminate()
        } else if (quietMs >= stepMs && ws.readyState === socketStates.open) ws.ping()
      }, stepMs)
      .unref()
  }

  #heard(): void {
    this.#lastHeardMs = this.options.clock.now()
  }

  #onClose(ws: ClientSocket, code: number): void {
    if (ws !== this.#ws) return
    const wasConnected = this.#connected
    this.#connected = false
    this.#pendingAcks.clear()
    this.#heartbeatTimer?.cancel()
    this.#heartbeatTimer = undefined
    if (wasConnected) this.emit('disconnect', code)
    if (this.#closed) return
    if (code === closeCodeOf('SLUICE_ERR_SESSION_REPLACED')) this.#replaced()
    const fatal = this.#fatalClose(code)
    if (fatal !== undefined) return this.#fail(fatal)
    // A redirect is followed at once, a few times in a row; a loop of them falls back to the jittered backoff.
    if (this.#redirectUrl !== undefined && this.#redirects < 3) {
      this.#redirects++
      this.#connect()
      return
    }
    if (this.#redirectUrl === undefined) this.#urlIndex++
    if (wasConnected && this.options.clock.now() - this.#welcomedAtMs >= stableConnectionMs)
      this.#attempt = 0
    const delayMs = backoffDelayMs(
      this.#attempt,
      this.options.backoffBaseMs,
      this.options.backoffCapMs,
      this.options.random,
    )
    this.#attempt++
    // A connection that was up and dropped is news for the 'disconnect' event; an attempt that
    // never got a welcome is trouble worth saying, and so is a close for a frame the
    // coordinator refused (a bug on one side or the other: said, at most every 30 s).
    const coded = codeOfClose(code)
    if (!wasConnected) this.#trouble(code, delayMs)
    else if (coded !== undefined && !errorCatalogue[coded].retryable) {
      const now = this.options.clock.now()
      if (now - this.#lastTroubleMs >= troubleEveryMs) {
        this.#lastTroubleMs = now
        this.#surface(
          new SluiceError(
            coded,
            `closed with ${code} by ${this.#url}: the coordinator refused a frame of this client; reconnecting with backoff`,
          ),
        )
      }
    } else
      this.options.logger?.info(
        { code, delayMs: Math.round(delayMs) },
        'sluice connection closed; reconnecting',
      )
    this.#reconnectTimer = this.options.clock.setTimeout(() => {
      this.#reconnectTimer = undefined
      this.#connect()
    }, delayMs)
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
        this.#connected = true
        this.#welcomeLedger = msg.ledger
        // The backoff starts over only once this connection has lasted (#onClose): a coordinator
        // that welcomes and then closes at once (a frame it refuses) is not retried ever faster.
        this.#welcomedAtMs = this.options.clock.now()
        this.#redirects = 0
        // 1.5 periods of silence: with the coordinator's ping every period, a live link is never
        // that quiet, and a dead one is noticed within two periods.
        if (this.#ws !== undefined) this.#watch(this.#ws, 1.5 * msg.heartbeatMs, 'heartbeat missed')
        for (const r of this.#resources.values()) r.setLearning(msg.learningMs > 0)
        this.emit('connect')
        for (const w of this.#readyWaiters.splice(0)) w.resolve()
        // A resource refused on an earlier connection is asked for once more (the config may
        // have changed since).
        for (const r of this.#resources.values()) r.retryRefused()
        if (this.#unreleased.size > 0) {
          this.#sendSplit([...this.#unreleased], (resources) => ({ type: 'release', resources }))
          this.#unreleased.clear()
        }
        this.#report(false)
        return
      case 'lease':
        return this.#onLease(msg)
      case 'error': {
        // The close that follows says it better (with the fresh id): see #replaced.
        if (msg.code === 'SLUICE_ERR_SESSION_REPLACED') return
        // An EventEmitter 'error' with no listener throws: only emit when someone listens.
        const error = SluiceError.fromWire(msg.code, msg.message, msg.resource)
        // A resource the coordinator refuses for good is not asked for again on this connection.
        if (msg.resource !== undefined && refusesResource.has(msg.code))
          for (const id of msg.resources ?? [msg.resource]) {
            const e = id === msg.resource ? error : SluiceError.fromWire(msg.code, msg.message, id)
            this.#resources.get(id)?.refuse(e)
            this.#families.get(id)?.refuse(e)
          }
        // A key the coordinator will not lease on its own now stays at the default share: quiet.
        if (msg.code === 'SLUICE_ERR_LIMIT_RESOURCES') {
          let keys = 0
          const ids = msg.resources ?? (msg.resource === undefined ? [] : [msg.resource])
          for (const id of ids) {
            const keyed = this.#familyOfKey(id)
            if (keyed === undefined) continue
            keyed.family.quietKey(keyed.key)
            keys++
          }
          if (keys > 0 && keys === ids.length) return
        }
        // A close follows the errors that end the connection: #onClose surfaces those.
        if (
          isErrorCode(msg.code) &&
          closeCodeOf(msg.code) !== internalCloseCode &&
          msg.resource === undefined
        )
          return
        this.#surface(error)
        return
      }
      case 'redirect': {
        const refusal = redirectRefusal(this.#url, msg.url, this.options.redirectTo)
        if (refusal !== undefined)
          this.#surface(new SluiceError('SLUICE_ERR_CLIENT_REDIRECT', refusal))
        else this.#redirectUrl = msg.url
        this.#ws?.close(1000)
        return
      }
    }
  }

  #onLease(msg: LeaseMessage): void {
    this.#heldLedger = this.#welcomeLedger
    // Each lease is acknowledged on its own: at once when in force, or (a concurrency decrease)
    // once in-flight work fits it. A held-back ack never holds back, nor is implied by, another.
    let held = 0
    const ready: string[] = []
    let period = Infinity
    for (const grant of msg.leases) {
      const r = this.#resources.get(grant.resource)
      period = Math.min(period, grant.refreshMs)
      if (r === undefined) {
        const inForce = this.#applyKeyed(grant)
        if (inForce) {
          // An older lease's held-back ack is void once a newer one is in force.
          this.#pendingAcks.delete(grant.resource)
          ready.push(grant.resource)
        } else {
          this.#pendingAcks.set(grant.resource, msg.seq)
          held++
        }
        continue
      }
      const inForce = r.applyLease(grant)
      r.setLearning(false)
      if (inForce) {
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
    if (held === 0) this.#send({ type: 'ack', seq: msg.seq })
    else if (ready.length > 0)
      this.#sendSplit(ready, (resources) => ({ type: 'ack', seq: msg.seq, resources }))
  }

  /** A lease of a keyed family or of one of its keys; true when it is in force (may be acknowledged). */
  #applyKeyed(grant: LeaseGrant): boolean {
    const family = this.#families.get(grant.resource)
    if (family !== undefined) return family.applyFamilyLease(grant)
    const keyed = this.#familyOfKey(grant.resource)
    return keyed === undefined ? true : keyed.family.applyKeyLease(keyed.key, grant)
  }

  /**
   * Another process took our client id over (4409). Whatever this process
   * was leased may now be counted as that one's: stop enforcing it at once
   * (capacity 0 until a new lease), and come back under a fresh id.
   */
  #replaced(): void {
    for (const r of this.#resources.values()) r.revoke()
    for (const f of this.#families.values()) f.revoke()
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
    if (!this.#connected || (this.#resources.size === 0 && this.#families.size === 0)) return
    const resources = []
    for (const r of this.#resources.values()) {
      if (r.refused !== undefined) continue
      const quota = r.usedInWindow()
      resources.push({
        resource: r.id,
        wants: clampQuantity(r.takeDemand()),
        ...(quota === undefined ? {} : { used: quota.used, window: quota.window }),
        ...(r.weight === undefined ? {} : { weight: r.weight }),
        ...(r.priority === undefined ? {} : { priority: r.priority }),
        usage: r.takeUsage(),
      })
    }
    for (const f of this.#families.values())
      if (f.refused === undefined) for (const entry of f.takeReport()) resources.push(entry)
    // A process with more hot keys than one message may carry (in entries or in bytes)
    // reports them in several (the usual report, within the bounds, goes as it is: no copy).
    this.#sendSplit(resources, (part) => ({
      type: 'demand',
      resources: part,
      ...(early ? { early: true } : {}),
    }))
  }

  /**
   * Sends the entries of `list` in as few messages made by `make` as keep each
   * within `domainLimits.maxEntries` and `maxFrameBytes`: a frame the
   * coordinator would refuse closes the connection, and with it every limit
   * of this process. A list within both goes in one message, as it is.
   */
  #sendSplit<T>(list: T[], make: (part: T[]) => ClientMessage): void {
    const maxBytes = this.options.maxFrameBytes
    if (list.length <= domainLimits.maxEntries) {
      const text = encodeMessage(make(list))
      if (text.length * 3 <= maxBytes || Buffer.byteLength(text) <= maxBytes)
        return this.#sendText(text)
    }
    const base = Buffer.byteLength(encodeMessage(make([])))
    let part: T[] = []
    let bytes = base
    for (const item of list) {
      const size = Buffer.byteLength(JSON.stringify(item)) + 1
      if (part.length > 0 && (bytes + size > maxBytes || part.length >= domainLimits.maxEntries)) {
        this.#sendText(encodeMessage(make(part)))
        part = []
        bytes = base
      }
      part.push(item)
      bytes += size
    }
    if (part.length > 0) this.#sendText(encodeMessage(make(part)))
  }

  /**
   * A close no retry can fix: a wrong token, a protocol this coordinator
   * does not speak, a frame it refuses, or a URL with no coordinator behind
   * it. Undefined for everything else (the client retries).
   */
  #fatalClose(code: number): SluiceError | undefined {
    const http = /Unexpected server response: (\d+)/.exec(this.#lastSocketError?.message ?? '')
    if (http !== null && (http[1] === '404' || http[1] === '400'))
      return new SluiceError(
        'SLUICE_ERR_CLIENT_BAD_URL',
        `${this.options.urls.join(', ')}: HTTP ${http[1]} on the WebSocket upgrade: no Sluice coordinator at this path (it is /v1/connect, e.g. ws://127.0.0.1:7070/v1/connect)`,
      )
    // Only what no retry can fix stops the client: a token the coordinator does not know, and a
    // protocol version it does not speak. A close for one frame (malformed, too large, out of
    // order) is that frame's: the next connection starts afresh, with backoff (#onClose).
    const coded = codeOfClose(code)
    if (coded === 'SLUICE_ERR_AUTH_INVALID_TOKEN')
      return new SluiceError(
        coded,
        `closed with ${code} by ${this.options.urls.join(', ')}: check the token option against the coordinator’s tenants`,
      )
    if (coded === 'SLUICE_ERR_PROTO_VERSION')
      return new SluiceError(
        coded,
        `closed with ${code} by ${this.options.urls.join(', ')}: this client speaks protocol v${protocolVersion}, which the coordinator does not; upgrade them together`,
      )
    return undefined
  }

  /** Stops for good: no more reconnects; ready() and every resource's ready() reject. */
  #fail(error: SluiceError): void {
    this.#failure = error
    this.#reconnectTimer?.cancel()
    this.#reportTimer?.cancel()
    for (const w of this.#readyWaiters.splice(0)) w.reject(error)
    for (const r of this.#resources.values()) r.refuse(error)
    for (const f of this.#families.values()) f.refuse(error)
    this.#surface(error)
  }

  /** Retryable trouble: surfaced, at most once per troubleEveryMs, with what to check. */
  #trouble(code: number, delayMs: number): void {
    const now = this.options.clock.now()
    const url =
      this.options.urls[(this.#urlIndex - 1 + this.options.urls.length) % this.options.urls.length]
    this.options.logger?.debug(
      { code, delayMs: Math.round(delayMs) },
      'sluice connection closed; reconnecting',
    )
    if (now - this.#lastTroubleMs < troubleEveryMs) return
    this.#lastTroubleMs = now
    const cause = this.#lastSocketError?.message ?? `closed with ${code}`
    this.#surface(
      new SluiceError(
        'SLUICE_ERR_CLIENT_UNREACHABLE',
        `${url}: ${cause}; retrying with backoff (is the coordinator running, and is this its address?)`,
      ),
    )
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
    this.#sendText(encodeMessage(message))
  }

  #sendText(text: string): void {
    const ws = this.#ws
    if (ws !== undefined && ws.readyState === socketStates.open) ws.send(text)
  }
}

/** Connects to a coordinator; resources are added with `client.resource(id, options)`. */
export function createClient(options: ClientOptions): SluiceClient {
  return new SluiceClient(options)
}
