import WebSocket from 'ws'
import { backoffCapFor, backoffDelayMs, connectTimeoutFor } from '../shared/backoff.js'

/**
 * The coordinator benchmarks' load generator: `clients` simulated clients
 * over real WebSockets, spread over `resources` resources (client i on
 * `r${i % resources}`), each reporting demand once a second at its own
 * offset within the second, and acknowledging every lease. Light enough for
 * tens of thousands of clients in one process: each client's report is made
 * once, and replies are read by pattern, not parsed.
 *
 * With `reconnect`, a client whose connection closes comes back as the
 * client library does: the same id, after a full-jitter backoff
 * (`shared/backoff.ts`, the library's default base and cap unless given; a
 * connection refused outright retried within `refusedCapMs`), an attempt
 * not welcomed within `connectTimeoutMs` dropped and retried, and reports at
 * once on its welcome.
 */
export interface LoadOptions {
  readonly clients: number
  readonly resources: number
  /** Reports carry usage (admitted, refused, …) and hellos a name and library. */
  readonly withUsage: boolean
  readonly reconnect?: {
    readonly baseMs: number
    readonly capMs: number
    /** The library's `backoffRefusedCapMs` (500 ms by default). */
    readonly refusedCapMs?: number
    /** The library's `connectTimeoutMs` (10 s by default). */
    readonly connectTimeoutMs?: number
  }
  /**
   * Reports per client made in advance, sent in turn: 1 (the default) reports
   * the same demand every time; more vary it by up to ±20% between reports,
   * as real demand does.
   */
  readonly variants?: number
}

export class LoadClients {
  readonly #url: string
  readonly #options: LoadOptions
  readonly #sockets: (WebSocket | undefined)[]
  /** Client i's reports: `#frames[i * variants + k]`. */
  readonly #frames: string[]
  readonly #variants: number
  readonly #reports: Uint32Array
  readonly #hellos: string[]
  readonly #sentAt: Float64Array
  /** When client i's last report was made (any), and when its last lease came (0: none yet). */
  readonly #reportedAt: Float64Array
  readonly #leaseAt: Float64Array
  /** Half the ttl of client i's last lease: a report after that is due a renewal. */
  readonly #renewAfterMs: Float64Array
  readonly #attempts: Uint16Array
  /** Attempts in a row accepted and left without a welcome past their bound (as the library). */
  readonly #slowWelcomes: Uint8Array
  #tick: ReturnType<typeof setInterval> | undefined
  #closed = false
  /**
   * Report→lease latencies (ms) while `measuring`: from a report that is due a
   * renewal (half the last lease's life has passed since it came, or no lease
   * has come yet) to the next lease. The coordinator answers such a report at
   * once (renewals are due from a third to a half of a lease's life: see
   * Entry.renewDue), so this times the answer; earlier reports may or may not
   * earn one, and are not timed.
   * A report made while an earlier due one is unanswered times from the
   * earlier one: a coordinator behind by more than a second shows in full.
   */
  readonly latencies: number[] = []
  /**
   * The earlier measure, kept to compare: from the latest report, due or not,
   * to the next lease. A lease a round sends unasked (a decrease, say)
   * counts here as the time since the client's last report, up to a second
   * whatever the coordinator's speed.
   */
  readonly latenciesSinceReport: number[] = []
  measuring = false
  /** Leases received while `measuring`. */
  leasesMeasured = 0
  /** Called on each lease a client receives (after its ack is sent), with the client's index. */
  onLease: ((client: number) => void) | undefined
  /** Called on each welcome, with the client's index. */
  onWelcome: ((client: number) => void) | undefined

  constructor(url: string, options: LoadOptions) {
    this.#url = url
    this.#options = options
    const { clients, resources, withUsage } = options
    this.#sockets = new Array<WebSocket | undefined>(clients)
    this.#sentAt = new Float64Array(clients)
    this.#reportedAt = new Float64Array(clients)
    this.#leaseAt = new Float64Array(clients)
    this.#renewAfterMs = new Float64Array(clients)
    this.#attempts = new Uint16Array(clients)
    this.#slowWelcomes = new Uint8Array(clients)
    this.#hellos = Array.from({ length: clients }, (_, i) =>
      JSON.stringify(
        withUsage
          ? {
              type: 'hello',
              v: 1,
              clientId: `bench-${i}`,
              name: `bench-host-${i % 50}:${10_000 + i}`,
              library: 'sluice/0.1.0',
            }
          : { type: 'hello', v: 1, clientId: `bench-${i}` },
      ),
    )
    const variants = (this.#variants = options.variants ?? 1)
    this.#reports = new Uint32Array(clients)
    this.#frames = Array.from({ length: clients * variants }, (_, f) => {
      const i = Math.floor(f / variants)
      const k = f % variants
      // ±20% around the client's demand, the same for every run (no Math.random).
      const swing = k === 0 ? 1 : 0.8 + 0.4 * (((i * 7919 + k * 104729) % 1000) / 1000)
      const wants = Math.round((5 + (i % 20)) * swing * 100) / 100
      return JSON.stringify({
        type: 'demand',
        resources: [
          withUsage
            ? {
                resource: `r${i % resources}`,
                wants,
                // What a client's limiter says it did over the last second.
                usage: {
                  windowMs: 1000,
                  admitted: wants,
                  refused: i % 7,
                  admittedCalls: Math.round(wants),
                  refusedCalls: i % 7,
                  waiting: 0,
                },
              }
            : { resource: `r${i % resources}`, wants },
        ],
      })
    })
  }

  /** Connects every client, in batches of 500 so the accept queue is never flooded. */
  async connectAll(): Promise<void> {
    const { clients } = this.#options
    for (let start = 0; start < clients; start += 500) {
      const batch: Promise<void>[] = []
      for (let i = start; i < Math.min(clients, start + 500); i++) batch.push(this.#connect(i))
      await Promise.all(batch)
    }
  }

  /** Connects client `i`; resolves on its welcome (rejects on an error, without `reconnect`). */
  #connect(i: number): Promise<void> {
    return new Promise((resolve, reject) => {
      const ws = new WebSocket(this.#url)
      this.#sockets[i] = ws
      const reconnect = this.#options.reconnect
      let refused = false
      let welcomed = false
      // As the library: an attempt not welcomed in time (a handshake lost in a full accept
      // queue, say) is dropped and retried; one the coordinator accepted and left without a
      // welcome doubles the next one's bound, up to 8 times, until a welcome.
      const timeout =
        reconnect === undefined
          ? undefined
          : setTimeout(
              () => {
                if (welcomed) return
                if (ws.readyState === WebSocket.OPEN) this.#slowWelcomes[i]!++
                ws.terminate()
              },
              connectTimeoutFor(reconnect.connectTimeoutMs ?? 10_000, this.#slowWelcomes[i]!),
            )
      ws.once('error', (error: NodeJS.ErrnoException) => {
        refused = error.code === 'ECONNREFUSED'
        if (reconnect === undefined) reject(error)
      })
      ws.once('close', () => {
        clearTimeout(timeout)
        if (this.#sockets[i] === ws) this.#sockets[i] = undefined
        if (reconnect === undefined || this.#closed) return
        const attempt = this.#attempts[i]!
        this.#attempts[i] = Math.min(attempt + 1, 60_000)
        const capMs = backoffCapFor(refused, reconnect.capMs, reconnect.refusedCapMs ?? 500)
        const delayMs = backoffDelayMs(attempt, reconnect.baseMs, capMs, Math.random)
        setTimeout(() => {
          if (!this.#closed) void this.#connect(i)
        }, delayMs)
      })
      ws.on('message', (data: Buffer) => {
        const text = data.toString()
        const type = /"type":"(\w+)"/.exec(text)?.[1]
        if (type === 'welcome') {
          welcomed = true
          this.#attempts[i] = 0
          this.#slowWelcomes[i] = 0
          // A new session: its first lease answers its first report, whatever the last one did.
          this.#sentAt[i] = 0
          this.#leaseAt[i] = 0
          this.onWelcome?.(i)
          // As the client library does: a report at once on each welcome.
          if (this.#tick !== undefined) this.#report(i)
          resolve()
        } else if (type === 'lease') {
          const now = performance.now()
          const sent = this.#sentAt[i]!
          const reported = this.#reportedAt[i]!
          if (this.measuring) {
            this.leasesMeasured++
            if (sent > 0) this.latencies.push(now - sent)
            if (reported > 0) this.latenciesSinceReport.push(now - reported)
          }
          this.#sentAt[i] = 0
          this.#reportedAt[i] = 0
          this.#leaseAt[i] = now
          const ttlMs = Number(/"ttlMs":(\d+)/.exec(text)?.[1] ?? 0)
          this.#renewAfterMs[i] = ttlMs / 2
          ws.send(`{"type":"ack","seq":${/"seq":(\d+)/.exec(text)?.[1]}}`)
          this.onLease?.(i)
        }
      })
      ws.once('open', () => ws.send(this.#hellos[i]!))
    })
  }

  #report(i: number): void {
    const ws = this.#sockets[i]
    if (ws === undefined || ws.readyState !== WebSocket.OPEN) return
    const now = performance.now()
    this.#reportedAt[i] = now
    const leaseAt = this.#leaseAt[i]!
    // Due a renewal, and no earlier due report unanswered: time the answer from here.
    if (this.#sentAt[i] === 0 && (leaseAt === 0 || now - leaseAt >= this.#renewAfterMs[i]!))
      this.#sentAt[i] = now
    const n = this.#reports[i]!
    this.#reports[i] = n + 1
    ws.send(this.#frames[i * this.#variants + (n % this.#variants)]!)
  }

  /** Starts the reports: every client once a second, in 100 slots of 10 ms. */
  start(): void {
    const { clients } = this.#options
    const slots = 100
    let slot = 0
    this.#tick = setInterval(() => {
      for (let i = slot; i < clients; i += slots) this.#report(i)
      slot = (slot + 1) % slots
    }, 1000 / slots)
  }

  /** Stops reporting; connections stay. */
  stop(): void {
    clearInterval(this.#tick)
    this.#tick = undefined
  }

  /** Stops reporting and reconnecting, and drops every connection. */
  close(): void {
    this.stop()
    this.#closed = true
    for (const ws of this.#sockets) ws?.terminate()
  }
}
