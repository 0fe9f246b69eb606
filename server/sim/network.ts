import { EventEmitter } from 'node:events'
import type { Logger } from 'pino'
import type { ClientSocket } from '../../client/index.js'
import {
  decodeClientMessage,
  encodeMessage,
  closeCodeOf,
  formatError,
  type ErrorCode,
  type ManualClock,
  type ServerMessage,
} from '../../shared/index.js'
import type { Config } from '../config/index.js'
import { Coordinator, type SessionPort } from '../coordinator/index.js'
import { MemoryLedger } from '../ledger/index.js'

export interface NetworkOptions {
  readonly latencyMs: number
  readonly jitterMs: number
  readonly loss: number
  readonly heartbeatMs: number
  /** A connection attempt to an unreachable host fails after this long. */
  readonly connectTimeoutMs: number
  /** Coordinators keep a ledger that survives their crashes. */
  readonly ledger: boolean
}

/** One direction of one connection: messages arrive in order (TCP), each after latency + jitter. */
class Direction {
  lastAtMs = 0
}

/**
 * The simulated network and the coordinator's host: a real `Coordinator`
 * (the pool and allocation engine as they run in production) behind
 * simulated connections with latency, jitter, loss and partitions, all on
 * one manual clock. A crash drops the coordinator; `restart()` brings up a
 * new one, as a newly elected leader would be: empty and learning.
 */
export class SimHost {
  coordinator: Coordinator | undefined
  readonly clock: ManualClock
  readonly #options: NetworkOptions
  readonly #random: () => number
  readonly #log: Logger
  #config: Config
  readonly #sessions = new Set<SimSession>()
  readonly #ledger: MemoryLedger | undefined
  /** Client name → end of its partition (ms). */
  readonly #partitions = new Map<string, number>()
  messages = 0
  lost = 0

  constructor(
    config: Config,
    clock: ManualClock,
    options: NetworkOptions,
    random: () => number,
    log: Logger,
  ) {
    this.#config = config
    this.clock = clock
    this.#options = options
    this.#random = random
    this.#log = log
    this.#ledger = options.ledger ? new MemoryLedger() : undefined
    this.coordinator = this.#newCoordinator()
  }

  /**
   * A coordinator process: replicas share a holdings key, so a new one verifies what clients
   * hold, and (unless the scenario turns it off) a ledger that outlives each of them, so a new
   * one resumes from it instead of learning.
   */
  #newCoordinator(): Coordinator {
    const coordinator = new Coordinator(this.#config, this.clock, this.#log)
    coordinator.setHoldingsKeys({
      current: 'simulated replicas share this holdings key',
      previous: [],
    })
    const ledger = this.#ledger
    if (ledger !== undefined)
      coordinator.attachLedger(ledger, ledger.writes === 0 ? undefined : ledger.entries())
    return coordinator
  }

  get up(): boolean {
    return this.coordinator !== undefined
  }

  get config(): Config {
    return this.#config
  }

  partitioned(client: string): boolean {
    const until = this.#partitions.get(client)
    return until !== undefined && this.clock.now() < until
  }

  /** The coordinator process dies: connections drop (clients see a reset after one latency). */
  crash(): void {
    const dead = this.coordinator
    if (dead === undefined) return
    this.coordinator = undefined
    for (const session of [...this.#sessions]) session.sever(1006)
    dead.close()
  }

  restart(): void {
    if (this.coordinator !== undefined) return
    this.coordinator = this.#newCoordinator()
  }

  applyConfig(config: Config): void {
    this.#config = config
    this.coordinator?.applyConfig(config)
  }

  /** Cuts `clients` off until `untilMs`; the coordinator declares their sessions dead after a heartbeat. */
  partition(clients: readonly string[], untilMs: number): void {
    const cut = new Set(clients)
    for (const c of clients) this.#partitions.set(c, untilMs)
    const expired: SimSession[] = []
    this.clock.setTimeout(() => {
      for (const session of [...this.#sessions]) {
        if (cut.has(session.client) && this.partitioned(session.client)) {
          session.expire()
          expired.push(session)
        }
      }
    }, this.#options.heartbeatMs)
    this.clock.setTimeout(() => {
      for (const session of expired) session.heal()
    }, untilMs - this.clock.now())
  }

  /** A client's connection attempt. */
  connect(client: string): SimSocket {
    return new SimSocket(this, client)
  }

  // ---- transport ----

  /**
   * Delivers after latency + jitter, in order per direction (a WebSocket is
   * one TCP stream). A lost packet is resent after an RTO of 200 ms,
   * doubling while it is lost again, and holds up what follows it
   * (head-of-line blocking). A partition drops everything.
   */
  deliver(direction: Direction, client: string, callback: () => void): void {
    this.messages++
    if (this.partitioned(client)) return
    let delayMs = this.latency()
    for (
      let rtoMs = 200;
      this.#options.loss > 0 && this.#random() < this.#options.loss;
      rtoMs *= 2
    ) {
      this.lost++
      delayMs += rtoMs
    }
    const now = this.clock.now()
    const atMs = Math.max(direction.lastAtMs, now + delayMs)
    direction.lastAtMs = atMs
    this.clock.setTimeout(callback, atMs - now)
  }

  latency(): number {
    return this.#options.latencyMs + this.#random() * this.#options.jitterMs
  }

  get connectTimeoutMs(): number {
    return this.#options.connectTimeoutMs
  }

  open(socket: SimSocket): SimSession | undefined {
    const coordinator = this.coordinator
    if (coordinator === undefined) return undefined
    const session = new SimSession(this, coordinator, socket)
    this.#sessions.add(session)
    return session
  }

  forget(session: SimSession): void {
    this.#sessions.delete(session)
  }
}

/** The client's end of a simulated connection: what `SluiceClient` uses of a WebSocket. */
export class SimSocket extends EventEmitter implements ClientSocket {
  readyState = 0
  readonly client: string
  readonly toServer = new Direction()
  readonly #host: SimHost
  #session: SimSession | undefined

  constructor(host: SimHost, client: string) {
    super()
    this.#host = host
    this.client = client
    const clock = host.clock
    if (host.partitioned(client)) {
      clock.setTimeout(() => this.ended(1006), host.connectTimeoutMs)
      return
    }
    // The handshake takes a round trip; a host that is down refuses after one.
    clock.setTimeout(() => {
      if (this.readyState !== 0) return
      const session = host.up && !host.partitioned(client) ? host.open(this) : undefined
      if (session === undefined) return this.ended(1006)
      this.#session = session
      this.readyState = 1
      this.emit('open')
    }, 2 * host.latency())
  }

  send(data: string): void {
    if (this.readyState !== 1) return
    const session = this.#session!
    this.#host.deliver(this.toServer, this.client, () => session.receive(data))
  }

  close(code = 1000): void {
    if (this.readyState >= 2) return
    this.readyState = 2
    this.#session?.peerClosed()
    this.#host.clock.setTimeout(() => this.ended(code), 0)
  }

  /** A ping travels the network like any frame (a partition drops it); the session answers. */
  ping(): void {
    const session = this.#session
    if (this.readyState !== 1 || session === undefined) return
    this.#host.deliver(this.toServer, this.client, () => session.pinged())
  }

  /** Drops the connection at once; the coordinator hears of it if the network lets it. */
  terminate(): void {
    if (this.readyState === 3) return
    this.#session?.peerClosed()
    this.ended(1006)
  }

  /** The connection is over, as this end sees it. */
  ended(code: number): void {
    if (this.readyState === 3) return
    this.readyState = 3
    this.emit('close', code)
  }
}

/** The coordinator's end of a simulated connection: what the coordinator needs of a session. */
export class SimSession implements SessionPort {
  clientId: string | undefined = undefined
  tenant: string | undefined = undefined
  readonly upgradeToken = undefined
  readonly remoteAddress = undefined
  readonly toClient = new Direction()
  readonly #host: SimHost
  readonly #coordinator: Coordinator
  readonly #socket: SimSocket
  #dead = false
  /** Declared dead by the heartbeat while partitioned: the client learns when the partition heals. */
  #expired = false

  constructor(host: SimHost, coordinator: Coordinator, socket: SimSocket) {
    this.#host = host
    this.#coordinator = coordinator
    this.#socket = socket
  }

  get client(): string {
    return this.#socket.client
  }

  send(message: ServerMessage): void {
    if (this.#dead) return
    const text = encodeMessage(message)
    const socket = this.#socket
    this.#host.deliver(this.toClient, socket.client, () => {
      if (socket.readyState === 1) socket.emit('message', text)
    })
  }

  fail(code: ErrorCode, detail: string): void {
    if (this.#dead) return
    this.send({ type: 'error', code, message: formatError(code, detail) })
    const closeCode = closeCodeOf(code)
    this.#end()
    const socket = this.#socket
    this.#host.deliver(this.toClient, socket.client, () => socket.ended(closeCode))
  }

  receive(text: string): void {
    if (this.#dead) return
    const decoded = decodeClientMessage(text)
    if (!decoded.ok) return this.fail(decoded.code, decoded.detail)
    this.#coordinator.receive(this, decoded.message)
  }

  /** A ping arrived: the pong goes back the same way. */
  pinged(): void {
    if (this.#dead) return
    const socket = this.#socket
    this.#host.deliver(this.toClient, socket.client, () => {
      if (socket.readyState === 1) socket.emit('pong')
    })
  }

  /** The client closed its end: the close arrives after what the client sent before it. */
  peerClosed(): void {
    this.#host.deliver(this.#socket.toServer, this.#socket.client, () => this.#end())
  }

  /** The coordinator died: the client sees a reset after one latency. */
  sever(code: number): void {
    this.#dead = true
    this.#host.forget(this)
    const socket = this.#socket
    this.#host.clock.setTimeout(() => socket.ended(code), this.#host.latency())
  }

  expire(): void {
    this.#expired = true
    this.#end()
  }

  heal(): void {
    if (this.#expired) this.#socket.ended(1006)
  }

  #end(): void {
    if (this.#dead) return
    this.#dead = true
    this.#host.forget(this)
    this.#coordinator.disconnected(this)
  }
}
