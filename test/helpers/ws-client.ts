import WebSocket from 'ws'
import type { ClientMessage, LeaseMessage, ServerMessage } from '../../shared/index.js'

/**
 * A minimal protocol-level client for integration tests: sends raw messages
 * and queues what the coordinator sends, so a test can await the next
 * message of a type. No timers: waits end on messages or on close.
 */
export class TestClient {
  readonly ws: WebSocket
  readonly received: ServerMessage[] = []
  closeCode: number | undefined
  closeReason = ''
  readonly #waiters: Array<{
    match: (m: ServerMessage) => boolean
    resolve: (m: ServerMessage) => void
    reject: (e: Error) => void
  }> = []
  readonly opened: Promise<void>
  readonly closed: Promise<number>

  constructor(url: string, headers: Record<string, string> = {}) {
    this.ws = new WebSocket(url, { headers })
    this.opened = new Promise((resolve, reject) => {
      this.ws.once('open', () => resolve())
      this.ws.once('error', reject)
    })
    this.closed = new Promise((resolve) => {
      this.ws.on('close', (code, reason) => {
        this.closeCode = code
        this.closeReason = reason.toString()
        for (const w of this.#waiters.splice(0))
          w.reject(new Error(`closed with ${code} ${this.closeReason}`))
        resolve(code)
      })
    })
    this.ws.on('error', () => undefined)
    this.ws.on('message', (data: Buffer) => {
      const msg = JSON.parse(data.toString()) as ServerMessage
      const i = this.#waiters.findIndex((w) => w.match(msg))
      if (i >= 0) this.#waiters.splice(i, 1)[0]!.resolve(msg)
      else this.received.push(msg)
    })
  }

  static async connect(url: string, headers: Record<string, string> = {}): Promise<TestClient> {
    const client = new TestClient(url, headers)
    await client.opened
    return client
  }

  send(message: ClientMessage | Record<string, unknown>): void {
    this.ws.send(JSON.stringify(message))
  }

  sendRaw(data: string | Buffer): void {
    this.ws.send(data)
  }

  /** The next message matching `match` (already queued, or yet to come). */
  next<T extends ServerMessage = ServerMessage>(match: (m: ServerMessage) => boolean): Promise<T> {
    const i = this.received.findIndex(match)
    if (i >= 0) return Promise.resolve(this.received.splice(i, 1)[0] as T)
    if (this.closeCode !== undefined)
      return Promise.reject(new Error(`closed with ${this.closeCode}`))
    return new Promise((resolve, reject) =>
      this.#waiters.push({ match, resolve: resolve as (m: ServerMessage) => void, reject }),
    )
  }

  nextOfType<K extends ServerMessage['type']>(
    type: K,
  ): Promise<Extract<ServerMessage, { type: K }>> {
    return this.next((m) => m.type === type)
  }

  /** The next lease batch that carries `resource`. */
  nextLease(resource: string): Promise<LeaseMessage> {
    return this.next<LeaseMessage>(
      (m) => m.type === 'lease' && m.leases.some((l) => l.resource === resource),
    )
  }

  async hello(clientId: string, extra: Record<string, unknown> = {}): Promise<void> {
    this.send({ type: 'hello', v: 1, clientId, ...extra })
    await this.nextOfType('welcome')
  }

  /** Round trip: resolves once the coordinator has handled everything sent before (it answers a ping after them). */
  async flush(): Promise<void> {
    if (this.closeCode !== undefined || this.ws.readyState !== this.ws.OPEN) return
    await Promise.race([
      new Promise<void>((resolve) => {
        this.ws.once('pong', () => resolve())
        this.ws.ping()
      }),
      this.closed.then(() => undefined),
    ])
  }

  close(): Promise<number> {
    this.ws.close()
    return this.closed
  }
}
