import { createServer, connect, type Server, type Socket } from 'node:net'

/** What a proxy does with the bytes of its connections now. */
export type ProxyMode =
  /** Forward both ways. */
  | 'open'
  /** Forward nothing, keep every connection open: a black hole (a stalled peer, a dead route). */
  | 'stalled'
  /** Reset every connection, and every new one at once: a partition that the kernel reports. */
  | 'cut'

interface Pair {
  readonly down: Socket
  readonly up: Socket
  /** One side closed while stalled: the other learns only when the path opens again. */
  broken: boolean
}

/**
 * A TCP proxy on 127.0.0.1 for fault tests: one per client process, so each
 * client's link can be cut, stalled (a black hole: the connection stays up,
 * nothing passes) or delayed on its own. Stalling pauses reading on both
 * sides, so nothing is forwarded and the kernel buffers fill as on a dead
 * route; resuming forwards what waited, in order.
 */
export class TcpProxy {
  readonly #server: Server
  readonly #target: { host: string; port: number }
  readonly #pairs = new Set<Pair>()
  #mode: ProxyMode = 'open'
  #delayMs = 0
  port = 0
  /** Connections accepted so far (attempts by the client behind it). */
  accepted = 0

  private constructor(targetPort: number, targetHost: string) {
    this.#target = { host: targetHost, port: targetPort }
    this.#server = createServer((down) => this.#accept(down))
  }

  /** Starts a proxy on 127.0.0.1 (port 0) to `targetPort`. */
  static async start(targetPort: number, targetHost = '127.0.0.1'): Promise<TcpProxy> {
    const proxy = new TcpProxy(targetPort, targetHost)
    await new Promise<void>((resolve) => proxy.#server.listen(0, '127.0.0.1', resolve))
    proxy.port = (proxy.#server.address() as { port: number }).port
    return proxy
  }

  get mode(): ProxyMode {
    return this.#mode
  }

  /** Points new connections at another port (a restarted coordinator). */
  retarget(port: number): void {
    this.#target.port = port
  }

  set(mode: ProxyMode): void {
    this.#mode = mode
    for (const pair of this.#pairs) this.#apply(pair)
  }

  /** Holds every chunk this long before forwarding it (order kept). */
  delay(ms: number): void {
    this.#delayMs = ms
  }

  async close(): Promise<void> {
    for (const pair of this.#pairs) {
      pair.down.destroy()
      pair.up.destroy()
    }
    this.#pairs.clear()
    await new Promise<void>((resolve) => this.#server.close(() => resolve()))
  }

  #accept(down: Socket): void {
    this.accepted++
    if (this.#mode === 'cut') {
      down.resetAndDestroy()
      return
    }
    const up = connect(this.#target.port, this.#target.host)
    // As ws sets on its own sockets: a small frame leaves at once, not after Nagle's wait for
    // the peer's (delayed) ack (remote decisions' answers waited 10 ms at the median for it).
    down.setNoDelay(true)
    up.setNoDelay(true)
    const pair: Pair = { down, up, broken: false }
    this.#pairs.add(pair)
    const drop = (): void => {
      // In a black hole a reset does not get through either.
      if (this.#mode === 'stalled') {
        pair.broken = true
        return
      }
      if (!this.#pairs.delete(pair)) return
      down.destroy()
      up.destroy()
    }
    down.on('error', drop)
    up.on('error', drop)
    down.on('close', drop)
    up.on('close', drop)
    this.#pipe(down, up)
    this.#pipe(up, down)
    this.#apply(pair)
  }

  #pipe(from: Socket, to: Socket): void {
    from.on('data', (chunk: Buffer) => {
      if (this.#delayMs <= 0) to.write(chunk)
      // Wall-clock delay on purpose: this proxy stands between real processes.
      else setTimeout(() => to.writable && to.write(chunk), this.#delayMs)
    })
  }

  #apply(pair: Pair): void {
    if (this.#mode === 'cut') {
      pair.down.resetAndDestroy()
      pair.up.resetAndDestroy()
    } else if (this.#mode === 'stalled') {
      pair.down.pause()
      pair.up.pause()
    } else if (pair.broken) {
      this.#pairs.delete(pair)
      pair.down.destroy()
      pair.up.destroy()
    } else {
      pair.down.resume()
      pair.up.resume()
    }
  }
}
