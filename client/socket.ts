import WebSocket from 'ws'

/**
 * What the client needs of its connection: the subset of a `ws` WebSocket it
 * uses. The default is a real WebSocket; the simulator passes a simulated one.
 */
export interface ClientSocket {
  /** 0 connecting, 1 open, 2 closing, 3 closed (the WebSocket constants). */
  readonly readyState: number
  send(data: string): void
  close(code?: number): void
  /** Drops the connection at once, without a closing handshake (it may be dead). */
  terminate(): void
  ping(): void
  on(event: 'open' | 'pong' | 'ping', listener: () => void): this
  on(event: 'message', listener: (data: Buffer | string) => void): this
  on(event: 'close', listener: (code: number) => void): this
  on(event: 'error', listener: (error: Error) => void): this
  once(event: 'close', listener: () => void): this
  off(event: 'pong' | 'close', listener: () => void): this
}

/** TLS options passed to a real WebSocket for wss:// URLs. */
export interface SocketTls {
  readonly ca?: string | Buffer | undefined
  readonly cert?: string | Buffer | undefined
  readonly key?: string | Buffer | undefined
  readonly rejectUnauthorized: boolean
}

export type SocketFactory = (
  url: string,
  headers: Record<string, string>,
  tls?: SocketTls,
) => ClientSocket

export const socketStates = { connecting: 0, open: 1, closing: 2, closed: 3 } as const

export const webSocketFactory: SocketFactory = (url, headers, tls) =>
  new WebSocket(url, {
    headers,
    ...(tls === undefined
      ? {}
      : {
          rejectUnauthorized: tls.rejectUnauthorized,
          ...(tls.ca === undefined ? {} : { ca: tls.ca }),
          ...(tls.cert === undefined ? {} : { cert: tls.cert }),
          ...(tls.key === undefined ? {} : { key: tls.key }),
        }),
  })
