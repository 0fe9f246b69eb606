import type { IncomingMessage, Server } from 'node:http'
import type { Duplex } from 'node:stream'
import type { Logger } from 'pino'
import { WebSocketServer, type WebSocket } from 'ws'
import { connectPath, systemClock, type Clock, type Timer } from '../../shared/index.js'
import type { Coordinator } from '../coordinator/index.js'
import { HeartbeatSlots } from './heartbeat-slots.js'
import { Turns } from './turns.js'
import { WsSession } from './ws-session.js'

/**
 * The WebSocket side of the coordinator's HTTP server: upgrades requests
 * for /v1/connect, one session each, and pings every session once per
 * heartbeat period on one shared timer, a slice of the sessions per tick.
 */
export class Gateway {
  readonly #wss: WebSocketServer
  readonly #sessions: HeartbeatSlots<WsSession>
  readonly #heartbeat: Timer
  readonly #onUpgrade: (req: IncomingMessage, socket: Duplex, head: Buffer) => void
  readonly #server: Server
  readonly #coordinator: Coordinator
  /** The event loop's turns: the frames of all connections take at most a share of each (turns.ts). */
  readonly #turns: Turns

  /** `loopClock` times the event loop's turns (the real clock, whatever `clock` is). */
  constructor(
    server: Server,
    coordinator: Coordinator,
    clock: Clock,
    log: Logger,
    loopClock: Clock = systemClock,
  ) {
    this.#turns = new Turns(loopClock)
    this.#server = server
    this.#coordinator = coordinator
    // Frames up to twice the limit reach the session, which closes with 4413;
    // beyond that ws itself cuts the connection (1009) without buffering more.
    this.#wss = new WebSocketServer({
      noServer: true,
      maxPayload: coordinator.limits.maxFrameBytes * 2,
      // Pings are answered by the session, in order with the frames it lets wait (ws-session.ts).
      autoPong: false,
    })
    this.#onUpgrade = (req, socket, head) => {
      const path = (req.url ?? '').split('?')[0]
      if (path !== connectPath || coordinator.closed) {
        socket.end(
          `HTTP/1.1 ${coordinator.closed ? '503 Service Unavailable' : '404 Not Found'}\r\nConnection: close\r\n\r\n`,
        )
        return
      }
      this.#wss.handleUpgrade(req, socket, head, (ws) => this.#accept(ws, req, clock, log))
    }
    server.on('upgrade', this.#onUpgrade)
    // Each session is visited once a period, one whole period apart: a slot per tick.
    const periodMs = coordinator.limits.heartbeatMs
    this.#sessions = new HeartbeatSlots(HeartbeatSlots.countFor(periodMs))
    this.#heartbeat = clock
      .setInterval(() => {
        for (const session of this.#sessions.nextDue()) {
          if (!session.alive) session.terminate()
          else session.ping()
        }
      }, periodMs / this.#sessions.slotCount)
      .unref()
  }

  /**
   * A session for an upgraded connection. Its own method so that the close
   * listener, which lives as long as the connection, holds only the session:
   * a closure made inside the upgrade handler would keep that handler's
   * scope, and with it the upgrade request, its headers and its buffer,
   * alive for every client (about 2 KB each, seen in a heap snapshot).
   */
  #accept(ws: WebSocket, req: IncomingMessage, clock: Clock, log: Logger): void {
    const session = new WsSession(ws, req, this.#coordinator, clock, log, this.#turns)
    this.#sessions.add(session)
    ws.on('close', () => this.#sessions.delete(session))
  }

  get sessionCount(): number {
    return this.#sessions.size
  }

  close(): void {
    this.#heartbeat.cancel()
    this.#server.off('upgrade', this.#onUpgrade)
    for (const client of this.#wss.clients) client.terminate()
    this.#wss.close()
  }
}
