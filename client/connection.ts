import {
  SluiceError,
  backoffCapFor,
  backoffDelayMs,
  bearerHeader,
  closeCodeOf,
  codeOfClose,
  connectTimeoutFor,
  domainLimits,
  encodeMessage,
  errorCatalogue,
  protocolVersion,
  type ClientMessage,
  type Timer,
} from '../shared/index.js'
import type { ResolvedClientOptions } from './options.js'
import { socketStates, type ClientSocket } from './socket.js'

/** Retryable trouble (a coordinator not reachable) is surfaced at most this often, ms. */
const troubleEveryMs = 30_000

/**
 * How long a connection must have lasted for its close to start the
 * reconnect backoff over, ms: a close sooner than this (the coordinator
 * refusing what the process sends at once, every time) keeps the backoff
 * growing, so such a loop slows to one attempt per `backoffCapMs`.
 */
const stableConnectionMs = 10_000

/**
 * How long `close()` waits for the coordinator's half of the WebSocket closing handshake before
 * it destroys the socket, ms. Unbounded here, ws waits 30 s: a coordinator that stalled (stopped,
 * a half-open link) held a SIGTERM handler's `await client.close()` that long.
 */
const closeHandshakeMs = 1_000

/** Whether a connection attempt failed because nothing listens at the address (TCP refused). */
function refusedOutright(error: Error | undefined): boolean {
  return (error as NodeJS.ErrnoException | undefined)?.code === 'ECONNREFUSED'
}

/** What a connection asks of the client around it. */
export interface ConnectionHost {
  /** The hello to say on a new connection (who, what it holds). */
  hello(): ClientMessage
  /** A frame from the coordinator. */
  message(text: string): void
  /** The connection closed (not by `close()`): `wasWelcomed` when it had been. */
  closed(code: number, wasWelcomed: boolean): void
  /** Another process took the client id over (4409): before the next connection. */
  replaced(): void
  /** A close no retry can fix (a bad token, another protocol, no coordinator at the URL). */
  fatal(error: SluiceError): void
  /** Says what went wrong where the user will see it. */
  surface(error: SluiceError): void
  /** The client id, for the log. */
  clientId(): string
}

/**
 * One client's WebSocket to the coordinator, kept up: connected to each URL
 * in turn (or to where a redirect says), watched for silence (a connection
 * quiet for its bound is dead, and replaced), reconnected with capped
 * exponential backoff and full jitter, which starts over only once a
 * connection has lasted. Only a bad token, a protocol version the
 * coordinator does not speak, or a URL with no coordinator stop it; a close
 * for one frame reconnects. What is said on it is the client's (host).
 */
export class Connection {
  readonly #options: ResolvedClientOptions
  readonly #host: ConnectionHost
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
  #welcomed = false
  /** Attempts in a row accepted and then left silent past their connect timeout (no welcome). */
  #slowWelcomes = 0
  #closed = false
  #reconnectTimer: Timer | undefined
  #heartbeatTimer: Timer | undefined
  #lastHeardMs = 0
  /** The transport's last error on the current connection (e.g. an HTTP answer to the upgrade). */
  #lastSocketError: Error | undefined
  /** When retryable trouble was last surfaced: at most once per `troubleEveryMs`. */
  #lastTroubleMs = -Infinity

  constructor(options: ResolvedClientOptions, host: ConnectionHost) {
    this.#options = options
    this.#host = host
  }

  /** Whether the coordinator has welcomed the connection in hand. */
  get welcomed(): boolean {
    return this.#welcomed
  }

  /** The URL of the connection in hand. */
  get url(): string {
    return this.#url
  }

  /** Opens the first connection. */
  start(): void {
    this.#connect()
  }

  /** The coordinator welcomed this connection: from now on, silence for 1.5 heartbeats is death. */
  welcome(heartbeatMs: number): void {
    this.#welcomed = true
    this.#slowWelcomes = 0
    // The backoff starts over only once this connection has lasted (#onClose): a coordinator
    // that welcomes and then closes at once (a frame it refuses) is not retried ever faster.
    this.#welcomedAtMs = this.#options.clock.now()
    this.#redirects = 0
    // 1.5 periods of silence: with the coordinator's ping every period, a live link is never
    // that quiet, and a dead one is noticed within two periods.
    if (this.#ws !== undefined) this.#watch(this.#ws, 1.5 * heartbeatMs, 'heartbeat missed')
  }

  /** Follows a redirect (already judged acceptable): closes, and connects there next. */
  redirect(url: string): void {
    this.#redirectUrl = url
    this.#ws?.close(1000)
  }

  /** Closes for a refused redirect (the next attempt is the next URL, after a backoff). */
  dropCurrent(): void {
    this.#ws?.close(1000)
  }

  send(message: ClientMessage): void {
    this.#sendText(encodeMessage(message))
  }

  /** Sends a message already encoded (the caller checked it fits maxFrameBytes). */
  sendText(text: string): void {
    this.#sendText(text)
  }

  /**
   * Sends the entries of `list` in as few messages made by `make` as keep each
   * within `domainLimits.maxEntries` and `maxFrameBytes`: a frame the
   * coordinator would refuse closes the connection, and with it every limit
   * of this process. A list within both goes in one message, as it is.
   */
  sendSplit<T>(list: T[], make: (part: T[]) => ClientMessage): void {
    const maxBytes = this.#options.maxFrameBytes
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

  /** Resolves once the coordinator has answered a ping: all it sent before has arrived. */
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

  /** No more reconnects (a close no retry fixes). */
  stop(): void {
    this.#closed = true
    this.#reconnectTimer?.cancel()
  }

  /** Closes for good: no reconnect, the connection in hand closed (resolves once it is). */
  async close(): Promise<void> {
    this.#closed = true
    this.#reconnectTimer?.cancel()
    this.#heartbeatTimer?.cancel()
    const ws = this.#ws
    if (ws !== undefined && ws.readyState !== socketStates.closed) {
      await new Promise<void>((resolve) => {
        const timer = this.#options.clock.setTimeout(() => ws.terminate(), closeHandshakeMs)
        ws.once('close', () => {
          timer.cancel()
          resolve()
        })
        ws.close(1000)
      })
    }
  }

  #sendText(text: string): void {
    const ws = this.#ws
    if (ws !== undefined && ws.readyState === socketStates.open) ws.send(text)
  }

  #connect(): void {
    if (this.#closed) return
    const options = this.#options
    const url = this.#redirectUrl ?? options.urls[this.#urlIndex % options.urls.length]!
    this.#redirectUrl = undefined
    this.#url = url
    this.#lastSocketError = undefined
    const headers: Record<string, string> = {}
    if (options.token !== undefined) headers.authorization = bearerHeader(options.token)
    const ws = options.socketFactory(url, headers, options.tls)
    this.#ws = ws
    // Until the welcome, the connect timeout is the bound: a handshake into a black hole ends.
    // Each attempt the coordinator accepted and left silent doubles the next one's (up to 8×):
    // dropped and tried again, it only adds a hello to what the coordinator is behind on.
    this.#watch(
      ws,
      connectTimeoutFor(options.connectTimeoutMs, this.#slowWelcomes),
      'no welcome in time',
    )
    ws.on('open', () => this.send(this.#host.hello()))
    ws.on('message', (data: Buffer | string) => {
      this.#heard()
      this.#host.message(typeof data === 'string' ? data : data.toString('utf8'))
    })
    ws.on('ping', () => this.#heard())
    ws.on('pong', () => this.#heard())
    ws.on('error', (error) => {
      this.#lastSocketError = error
      options.logger?.debug({ err: error, url }, 'sluice connection error')
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
    const clock = this.#options.clock
    this.#lastHeardMs = clock.now()
    const stepMs = Math.max(1, Math.floor(silenceMs / 3))
    this.#heartbeatTimer = clock
      .setInterval(() => {
        if (ws !== this.#ws || ws.readyState >= socketStates.closing) return
        const quietMs = clock.now() - this.#lastHeardMs
        if (quietMs >= silenceMs) {
          // Accepted, then silent before any welcome: the coordinator is there, but behind.
          if (!this.#welcomed && ws.readyState === socketStates.open) this.#slowWelcomes++
          this.#options.logger?.warn(
            { quietMs: Math.round(quietMs), clientId: this.#host.clientId() },
            `sluice: connection to the coordinator is dead (${why}); reconnecting`,
          )
          ws.terminate()
        } else if (quietMs >= stepMs && ws.readyState === socketStates.open) ws.ping()
      }, stepMs)
      .unref()
  }

  #heard(): void {
    this.#lastHeardMs = this.#options.clock.now()
  }

  #onClose(ws: ClientSocket, code: number): void {
    if (ws !== this.#ws) return
    const wasWelcomed = this.#welcomed
    this.#welcomed = false
    this.#heartbeatTimer?.cancel()
    this.#heartbeatTimer = undefined
    this.#host.closed(code, wasWelcomed)
    if (this.#closed) return
    if (code === closeCodeOf('SLUICE_ERR_SESSION_REPLACED')) this.#host.replaced()
    const fatal = this.#fatalClose(code)
    if (fatal !== undefined) {
      this.stop()
      return this.#host.fatal(fatal)
    }
    // A redirect is followed at once, a few times in a row; a loop of them falls back to the jittered backoff.
    if (this.#redirectUrl !== undefined && this.#redirects < 3) {
      this.#redirects++
      this.#connect()
      return
    }
    const options = this.#options
    if (this.#redirectUrl === undefined) this.#urlIndex++
    if (wasWelcomed && options.clock.now() - this.#welcomedAtMs >= stableConnectionMs)
      this.#attempt = 0
    const refused = !wasWelcomed && refusedOutright(this.#lastSocketError)
    const delayMs = backoffDelayMs(
      this.#attempt,
      options.backoffBaseMs,
      backoffCapFor(refused, options.backoffCapMs, options.backoffRefusedCapMs),
      options.random,
    )
    this.#attempt++
    // A connection that was up and dropped is news for the 'disconnect' event; an attempt that
    // never got a welcome is trouble worth saying, and so is a close for a frame the
    // coordinator refused (a bug on one side or the other: said, at most every 30 s). A takeover
    // was said already (host.replaced).
    const coded = codeOfClose(code)
    if (!wasWelcomed) this.#trouble(code, delayMs)
    else if (
      coded !== undefined &&
      coded !== 'SLUICE_ERR_SESSION_REPLACED' &&
      !errorCatalogue[coded].retryable
    ) {
      const now = options.clock.now()
      if (now - this.#lastTroubleMs >= troubleEveryMs) {
        this.#lastTroubleMs = now
        this.#host.surface(
          new SluiceError(
            coded,
            `closed with ${code} by ${this.#url}: the coordinator refused a frame of this client; reconnecting with backoff`,
          ),
        )
      }
    } else
      options.logger?.info(
        { code, delayMs: Math.round(delayMs) },
        'sluice connection closed; reconnecting',
      )
    this.#reconnectTimer = options.clock.setTimeout(() => {
      this.#reconnectTimer = undefined
      this.#connect()
    }, delayMs)
  }

  /**
   * A close no retry can fix: a wrong token, a protocol this coordinator
   * does not speak, or a URL with no coordinator behind it. Undefined for
   * everything else (the client retries).
   */
  #fatalClose(code: number): SluiceError | undefined {
    const urls = this.#options.urls.join(', ')
    const http = /Unexpected server response: (\d+)/.exec(this.#lastSocketError?.message ?? '')
    if (http !== null && (http[1] === '404' || http[1] === '400'))
      return new SluiceError(
        'SLUICE_ERR_CLIENT_BAD_URL',
        `${urls}: HTTP ${http[1]} on the WebSocket upgrade: no Sluice coordinator at this path (it is /v1/connect, e.g. ws://127.0.0.1:7070/v1/connect)`,
      )
    // Only what no retry can fix stops the client: a token the coordinator does not know, and a
    // protocol version it does not speak. A close for one frame (malformed, too large, out of
    // order) is that frame's: the next connection starts afresh, with backoff (#onClose).
    const coded = codeOfClose(code)
    if (coded === 'SLUICE_ERR_AUTH_INVALID_TOKEN')
      return new SluiceError(
        coded,
        `closed with ${code} by ${urls}: check the token option against the coordinator’s tenants`,
      )
    if (coded === 'SLUICE_ERR_PROTO_VERSION')
      return new SluiceError(
        coded,
        `closed with ${code} by ${urls}: this client speaks protocol v${protocolVersion}, which the coordinator does not; upgrade them together`,
      )
    return undefined
  }

  /** Retryable trouble: surfaced, at most once per troubleEveryMs, with what to check. */
  #trouble(code: number, delayMs: number): void {
    const options = this.#options
    const now = options.clock.now()
    const url = options.urls[(this.#urlIndex - 1 + options.urls.length) % options.urls.length]
    options.logger?.debug(
      { code, delayMs: Math.round(delayMs) },
      'sluice connection closed; reconnecting',
    )
    if (now - this.#lastTroubleMs < troubleEveryMs) return
    this.#lastTroubleMs = now
    const cause = this.#lastSocketError?.message ?? `closed with ${code}`
    this.#host.surface(
      new SluiceError(
        'SLUICE_ERR_CLIENT_UNREACHABLE',
        `${url}: ${cause}; retrying with backoff (is the coordinator running, and is this its address?)`,
      ),
    )
  }
}
