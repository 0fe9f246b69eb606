import type { IncomingMessage } from 'node:http'
import type { Logger } from 'pino'
import WebSocket from 'ws'
import {
  bearerToken,
  decodeClientMessage,
  encodeMessage,
  entriesOf,
  closeCodeOf,
  formatError,
  nextTurn,
  type ClientMessage,
  type Clock,
  type ErrorCode,
  type ServerMessage,
  type Timer,
} from '../../shared/index.js'
import type { Coordinator, SessionPort } from '../coordinator/index.js'
import { Fifo } from '../../shared/limiters/index.js'
import { MessageBudget } from './message-budget.js'
import type { TurnWaiter, Turns } from './turns.js'

/** A `decide` frame counts in limits.maxDecideFramesPerSec once per this many bytes begun. */
const decideFrameUnitBytes = 4096

/**
 * Frames past what a turn of the event loop has left wait, in order, for the next turns
 * (turns.ts), and past `maxWaitingBytes` waiting a connection's socket is paused (TCP then
 * holds the sender back). libuv reads up to 32 × 64 KiB of a socket in a turn and ws hands
 * every frame of it on at once: a connection flooding remote decisions held the loop
 * 0.8–1.6 s at a time, and another tenant's lease waited 2.9 s for its renewal
 * (docs/security.md).
 */
const maxWaitingBytes = 256 * 1024

/** A frame waiting for a turn; a ping among them is answered in its place. */
interface WaitingFrame {
  readonly data: Buffer
  readonly isBinary: boolean
  readonly ping?: true
}

/**
 * One client connection over WebSocket: bounds the frames and message rate,
 * decodes every frame through the one gate, enforces hello-first, and hands
 * messages to the coordinator. Anything thrown inside is logged with its
 * cause and ends only this connection.
 */
export class WsSession implements SessionPort, TurnWaiter {
  clientId: string | undefined = undefined
  tenant: string | undefined = undefined
  readonly upgradeToken: string | undefined
  readonly remoteAddress: string | undefined
  /** Set on every pong; the heartbeat closes a session that stays silent for a whole period. */
  alive = true
  /** The round trip of the newest ping answered (ms); undefined before any (SessionPort). */
  rttMs: number | undefined = undefined
  /** When the ping awaiting its pong went (undefined: none awaits). */
  #pingAtMs: number | undefined = undefined
  readonly #ws: WebSocket
  readonly #coordinator: Coordinator
  readonly #clock: Clock
  readonly #log: Logger
  readonly #budget: MessageBudget
  readonly #entries: MessageBudget
  /** Remote decisions have budgets of their own: a busy gateway sends a frame per request. */
  readonly #decideFrames: MessageBudget
  readonly #asks: MessageBudget
  /** Asks refused past `#asks`: answered up to as many again, then the connection is closed. */
  readonly #refusals: MessageBudget
  #helloTimer: Timer | undefined
  #closing = false
  readonly #turns: Turns
  /** Frames past this turn's share, in order, and their bytes; a ping among them is answered in its place. */
  #waiting = new Fifo<WaitingFrame>()
  #waitingBytes = 0

  constructor(
    ws: WebSocket,
    req: IncomingMessage,
    coordinator: Coordinator,
    clock: Clock,
    log: Logger,
    turns: Turns,
  ) {
    this.#ws = ws
    this.#turns = turns
    this.#coordinator = coordinator
    this.#clock = clock
    this.#log = log
    this.upgradeToken = bearerToken(req.headers.authorization)
    this.remoteAddress = req.socket.remoteAddress
    const limits = coordinator.limits
    this.#budget = new MessageBudget(
      limits.maxMessagesPerSec,
      limits.maxMessagesPerSec * 2,
      clock.now(),
    )
    this.#entries = new MessageBudget(
      limits.maxEntriesPerSec,
      limits.maxEntriesPerSec * 2,
      clock.now(),
    )
    this.#decideFrames = new MessageBudget(
      limits.maxDecideFramesPerSec,
      limits.maxDecideFramesPerSec * 2,
      clock.now(),
    )
    this.#asks = new MessageBudget(limits.maxAsksPerSec, limits.maxAsksPerSec * 2, clock.now())
    this.#refusals = new MessageBudget(limits.maxAsksPerSec, limits.maxAsksPerSec * 2, clock.now())
    // A frame that came and waits for a turn (a busy coordinator: a restart under thousands of
    // clients) is the client's hello having come in time: it is handled, or refused, in turn.
    // Timed out while it waited, the client came back later with another hello (more work).
    // The verdict waits for the loop to have read its sockets once more: a timer that fires
    // late, the loop behind, runs before the reads of the hello that came meanwhile (two
    // turns: the first may come before this turn's reads).
    this.#helloTimer = clock.setTimeout(() => {
      this.#helloTimer = undefined
      nextTurn(() =>
        nextTurn(() => {
          if (this.clientId === undefined && this.#waiting.length === 0)
            this.fail(
              'SLUICE_ERR_PROTO_HELLO_TIMEOUT',
              `no hello within ${limits.helloTimeoutMs} ms`,
            )
        }),
      )
    }, limits.helloTimeoutMs)

    ws.on('message', (data: Buffer, isBinary: boolean) => this.#arrive(data, isBinary))
    // A ping is answered once every frame before it is handled (the gateway turns ws's
    // automatic pong off): a client's round trip still means "all I sent was read".
    ws.on('ping', (data: Buffer) => {
      if (this.#waiting.length === 0) ws.pong(data)
      else this.#waiting.push({ data, isBinary: false, ping: true })
    })
    ws.on('pong', () => this.#onPong())
    ws.on('close', () => this.#onClose())
    ws.on('error', (error) =>
      this.#log.debug({ err: error, clientId: this.clientId }, 'socket error'),
    )
    // The link's round trip from the start, not a heartbeat period later (alive is left as it
    // is: the heartbeat may visit before this pong comes back).
    this.#ping()
  }

  send(message: ServerMessage): void {
    const ws = this.#ws
    if (ws.readyState !== WebSocket.OPEN) return
    ws.send(encodeMessage(message))
    // A peer that stopped reading: close and drop it now rather than hold what it will not read.
    const bound = this.#coordinator.limits.maxSendBufferBytes
    if (ws.bufferedAmount > bound && !this.#closing) {
      this.fail(
        'SLUICE_ERR_SESSION_SLOW_READER',
        `${ws.bufferedAmount} bytes wait to be sent; limits.maxSendBufferBytes is ${bound}`,
      )
      ws.terminate()
    }
  }

  fail(code: ErrorCode, detail: string): void {
    if (this.#closing) return
    this.#closing = true
    const closeCode = closeCodeOf(code)
    this.send({ type: 'error', code, message: formatError(code, detail) })
    // The close reason carries only the code (reasons are limited to 123 bytes).
    this.#ws.close(closeCode, code)
    this.#log.info({ clientId: this.clientId, code, detail }, 'connection closed by coordinator')
  }

  /** Ends a peer that missed its heartbeat. */
  terminate(): void {
    if (this.#closing) return
    this.fail('SLUICE_ERR_SESSION_DEAD', 'no pong within a heartbeat period')
    this.#ws.terminate()
  }

  ping(): void {
    this.alive = false
    this.#ping()
  }

  #ping(): void {
    if (this.#ws.readyState !== WebSocket.OPEN) return
    this.#ws.ping()
    this.#pingAtMs = this.#clock.now()
  }

  /** A pong: the peer is alive, and the link's round trip is measured. */
  #onPong(): void {
    this.alive = true
    const sentMs = this.#pingAtMs
    if (sentMs === undefined) return
    this.#pingAtMs = undefined
    this.rttMs = Math.max(0, Math.round(this.#clock.now() - sentMs))
  }

  /** A frame arrives: handled now if this turn has room and none of this connection's wait, else later, in order. */
  #arrive(data: Buffer, isBinary: boolean): void {
    if (this.#waiting.length === 0 && this.#turns.mayHandle()) return this.#onFrame(data, isBinary)
    if (this.#waiting.length === 0) this.#turns.wait(this)
    this.#waiting.push({ data, isBinary })
    this.#waitingBytes += data.length
    if (this.#waitingBytes > maxWaitingBytes && !this.#ws.isPaused) this.#ws.pause()
  }

  /** Its turn has come (Turns): answers the pings at the front, then handles one frame if the turn has room. */
  serveOne(): 'more' | 'done' | 'full' {
    let next = this.#waiting.peek()
    while (next?.ping === true) {
      this.#waiting.shift()
      if (this.#ws.readyState === WebSocket.OPEN) this.#ws.pong(next.data)
      next = this.#waiting.peek()
    }
    if (next !== undefined) {
      if (!this.#turns.mayHandle()) return 'full'
      this.#waiting.shift()
      this.#waitingBytes -= next.data.length
      this.#onFrame(next.data, next.isBinary)
    }
    if (this.#waiting.length > 0) return 'more'
    if (this.#ws.isPaused) this.#ws.resume()
    return 'done'
  }

  #onFrame(data: Buffer, isBinary: boolean): void {
    if (this.#closing) return
    const limits = this.#coordinator.limits
    if (data.length > limits.maxFrameBytes) {
      return this.fail(
        'SLUICE_ERR_PROTO_FRAME_TOO_LARGE',
        `${data.length} bytes; limits.maxFrameBytes is ${limits.maxFrameBytes}`,
      )
    }
    const nowMs = this.#clock.now()
    const inBudget = this.#budget.take(nowMs)
    if (isBinary)
      return this.fail('SLUICE_ERR_PROTO_MALFORMED', 'binary frames are not part of the protocol')
    const decoded = decodeClientMessage(data.toString('utf8'))
    if (!decoded.ok) return this.fail(decoded.code, decoded.detail)
    const msg = decoded.message
    if (msg.type === 'decide') {
      // Not a message of the protocol's own budget: a frame per request of a busy gateway.
      if (inBudget) this.#budget.giveBack()
      // A frame counts once per 4 KiB begun: 1,000 small frames a second, or 4 MiB of large
      // ones (the asks a frame may carry are bounded by its bytes alone).
      if (!this.#decideFrames.take(nowMs, Math.ceil(data.length / decideFrameUnitBytes)))
        return this.fail(
          'SLUICE_ERR_PROTO_RATE_LIMITED',
          `limits.maxDecideFramesPerSec is ${limits.maxDecideFramesPerSec} (a frame counts once per 4 KiB)`,
        )
      // Asks past the budget are refused with when to ask again, as a limiter refuses.
      const allowed = this.#asks.takeUpTo(nowMs, msg.asks.length)
      if (allowed < msg.asks.length) {
        // Refused up to as many again as the budget: past that it is a flood, closed (4429).
        if (!this.#refusals.take(nowMs, msg.asks.length - allowed))
          return this.fail(
            'SLUICE_ERR_PROTO_RATE_LIMITED',
            `limits.maxAsksPerSec is ${limits.maxAsksPerSec}, and as many again were refused`,
          )
        this.#coordinator.refuseAsks(
          this,
          { type: 'decide', asks: msg.asks.slice(allowed) },
          this.#asks.msUntil(nowMs, 1),
        )
        if (allowed === 0) return
        return this.#handle({ type: 'decide', asks: msg.asks.slice(0, allowed) })
      }
    } else {
      if (!inBudget)
        return this.fail(
          'SLUICE_ERR_PROTO_RATE_LIMITED',
          `limits.maxMessagesPerSec is ${limits.maxMessagesPerSec}`,
        )
      if (!this.#entries.take(nowMs, entriesOf(msg)))
        return this.fail(
          'SLUICE_ERR_PROTO_RATE_LIMITED',
          `limits.maxEntriesPerSec is ${limits.maxEntriesPerSec}`,
        )
    }
    this.#handle(msg)
  }

  #handle(msg: ClientMessage): void {
    try {
      if (msg.type === 'hello') {
        this.#helloTimer?.cancel()
        this.#helloTimer = undefined
      }
      this.#coordinator.receive(this, msg)
    } catch (error) {
      this.#log.error(
        { err: error, clientId: this.clientId, type: msg.type },
        'failed handling a message',
      )
      this.fail('SLUICE_ERR_SERVER_INTERNAL', 'see coordinator log')
    }
  }

  #onClose(): void {
    // Frames that came before the close are handled before it (a release, say), as they would
    // have been had they not waited.
    const waiting = this.#waiting
    this.#waiting = new Fifo()
    this.#waitingBytes = 0
    for (const { data, isBinary, ping } of waiting) if (ping !== true) this.#onFrame(data, isBinary)
    this.#closing = true
    this.#helloTimer?.cancel()
    this.#helloTimer = undefined
    try {
      this.#coordinator.disconnected(this)
    } catch (error) {
      this.#log.error({ err: error, clientId: this.clientId }, 'failed handling a disconnect')
    }
  }
}
