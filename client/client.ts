import { socketStates, type ClientSocket } from './socket.js'
import { EventEmitter } from 'node:events'
import {
  SluiceError,
  backoffDelayMs,
  bearerHeader,
  decodeServerMessage,
  describeIssues,
  describeValue,
  resourceId,
  encodeMessage,
  errorCatalogue,
  type ClientMessage,
  type LeaseMessage,
  type Timer,
} from '../shared/index.js'
import { resolveClientOptions, type ClientOptions, type ResolvedClientOptions } from './options.js'
import { Resource, type ResourceOptions, type ResourceOwner } from './resource.js'

/**
 * A process's connection to the coordinator: one WebSocket, many resources.
 * Leases are kept right in the background; the hot path (`tryAcquire`) never
 * touches the network.
 *
 * Events: `connect`, `disconnect` (close code), `error` (coded error message from the coordinator).
 */
export class SluiceClient extends EventEmitter implements ResourceOwner {
  readonly options: ResolvedClientOptions
  readonly #resources = new Map<string, Resource>()
  #ws: ClientSocket | undefined
  #urlIndex = 0
  #redirectUrl: string | undefined
  /** Redirects followed since the last welcome; past a few, they wait a backoff like any retry. */
  #redirects = 0
  #attempt = 0
  #reconnectTimer: Timer | undefined
  #reportTimer: Timer | undefined
  #reportPeriodMs: number
  #connected = false
  #closed = false
  #pendingAck = 0
  #earlyBudget: number
  #earlyRequested = false
  #earlyTimer: Timer | undefined

  constructor(options: ClientOptions) {
    super()
    this.options = resolveClientOptions(options)
    this.#reportPeriodMs = this.options.refreshMs
    this.#earlyBudget = this.options.maxEarlyReportsPerRefresh
    this.#connect()
  }

  get clientId(): string {
    return this.options.clientId
  }

  /** Whether the coordinator has welcomed this connection. */
  get connected(): boolean {
    return this.#connected
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
      r = new Resource(id, options, this.options.clock, this)
      this.#resources.set(id, r)
      this.#scheduleReports()
      // Tell the coordinator at once, so the first lease does not wait a whole period.
      if (this.#connected) this.#report(false)
    }
    return r
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
    const ws = this.#ws
    if (ws !== undefined && ws.readyState === socketStates.open && this.#connected) {
      this.#send({ type: 'release', resources: [...this.#resources.keys()] })
    }
    for (const r of this.#resources.values()) r.close()
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
    if (this.#pendingAck === 0) return
    for (const r of this.#resources.values()) if (!r.drainedToLimit) return
    this.#send({ type: 'ack', seq: this.#pendingAck })
    this.#pendingAck = 0
  }

  releaseResource(id: string): void {
    const r = this.#resources.get(id)
    if (r === undefined) return
    this.#resources.delete(id)
    r.close()
    if (this.#connected) this.#send({ type: 'release', resources: [id] })
  }

  // ---- connection ----

  #connect(): void {
    if (this.#closed) return
    const url = this.#redirectUrl ?? this.options.urls[this.#urlIndex % this.options.urls.length]!
    this.#redirectUrl = undefined
    const headers: Record<string, string> = {}
    if (this.options.token !== undefined) headers.authorization = bearerHeader(this.options.token)
    const ws = this.options.socketFactory(url, headers)
    this.#ws = ws
    ws.on('open', () => {
      const holdings = [...this.#resources.values()]
        .filter((r) => r.lease !== undefined)
        .map((r) => ({ resource: r.id, capacity: r.lease!.capacity }))
      this.#send({
        type: 'hello',
        v: 1,
        clientId: this.options.clientId,
        ...(this.options.token === undefined ? {} : { token: this.options.token }),
        ...(holdings.length === 0 ? {} : { holdings }),
      })
    })
    ws.on('message', (data: Buffer | string) =>
      this.#onMessage(typeof data === 'string' ? data : data.toString('utf8')),
    )
    ws.on('error', (error) =>
      this.options.logger?.debug({ err: error, url }, 'sluice connection error'),
    )
    ws.on('close', (code) => this.#onClose(ws, code))
  }

  #onClose(ws: ClientSocket, code: number): void {
    if (ws !== this.#ws) return
    const wasConnected = this.#connected
    this.#connected = false
    this.#pendingAck = 0
    if (wasConnected) this.emit('disconnect', code)
    if (this.#closed) return
    // Another connection with our id took over: that one is the live one.
    if (code === errorCatalogue.SLUICE_ERR_SESSION_REPLACED.closeCode) return
    // A redirect is followed at once, a few times in a row; a loop of them falls back to the jittered backoff.
    if (this.#redirectUrl !== undefined && this.#redirects < 3) {
      this.#redirects++
      this.#connect()
      return
    }
    if (this.#redirectUrl === undefined) this.#urlIndex++
    const delayMs = backoffDelayMs(
      this.#attempt,
      this.options.backoffBaseMs,
      this.options.backoffCapMs,
      this.options.random,
    )
    this.#attempt++
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
        this.#attempt = 0
        this.#redirects = 0
        for (const r of this.#resources.values()) r.setLearning(msg.learningMs > 0)
        this.emit('connect')
        this.#report(false)
        return
      case 'lease':
        return this.#onLease(msg)
      case 'error': {
        // An EventEmitter 'error' with no listener throws: only emit when someone listens.
        const error = SluiceError.fromWire(msg.code, msg.message, msg.resource)
        if (this.listenerCount('error') > 0) this.emit('error', error)
        else this.options.logger?.warn({ code: msg.code, resource: msg.resource }, msg.message)
        return
      }
      case 'redirect':
        this.#redirectUrl = msg.url
        this.#ws?.close(1000)
        return
    }
  }

  #onLease(msg: LeaseMessage): void {
    let ackNow = true
    let period = Infinity
    for (const grant of msg.leases) {
      const r = this.#resources.get(grant.resource)
      if (r === undefined) continue
      if (!r.applyLease(grant)) ackNow = false
      period = Math.min(period, grant.refreshMs)
      r.setLearning(false)
    }
    if (Number.isFinite(period) && period !== this.#reportPeriodMs) {
      this.#reportPeriodMs = period
      this.#reportTimer?.cancel()
      this.#reportTimer = undefined
      this.#scheduleReports()
    }
    // A concurrency decrease is acknowledged only once in-flight work fits the new limit.
    if (ackNow) this.#send({ type: 'ack', seq: msg.seq })
    else this.#pendingAck = msg.seq
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
    if (!this.#connected || this.#resources.size === 0) return
    const resources = []
    for (const r of this.#resources.values()) {
      resources.push({
        resource: r.id,
        wants: Math.min(1e15, Math.max(0, r.takeDemand())),
        ...(r.weight === undefined ? {} : { weight: r.weight }),
        ...(r.priority === undefined ? {} : { priority: r.priority }),
      })
    }
    this.#send({ type: 'demand', resources, ...(early ? { early: true } : {}) })
  }

  #send(message: ClientMessage): void {
    const ws = this.#ws
    if (ws !== undefined && ws.readyState === socketStates.open) ws.send(encodeMessage(message))
  }
}

/** Connects to a coordinator; resources are added with `client.resource(id, options)`. */
export function createClient(options: ClientOptions): SluiceClient {
  return new SluiceClient(options)
}
