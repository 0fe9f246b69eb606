import type { ErrorCode } from '../../shared/index.js'
import type { ServerMessage } from '../../shared/index.js'

/** What the coordinator needs of one client connection, whatever carries it. */
export interface SessionPort {
  /** Set once the hello is accepted. */
  clientId: string | undefined
  tenant: string | undefined
  /** Token from the upgrade's `Authorization: Bearer`, if any. */
  readonly upgradeToken: string | undefined
  /** The peer's address, for throttling failed authentications; undefined when there is none. */
  readonly remoteAddress: string | undefined
  /**
   * Set on the coordinator's own in-process connection only (the central part of remote
   * decisions, central.ts): trusted as `tenant`'s, no token asked.
   */
  readonly internal?: { readonly tenant: string | undefined } | undefined
  /**
   * The connection's round trip as last measured (a ping and its pong), in ms; undefined
   * before any. A quota's blocks last it longer (server/pool/shapes/named-quota.ts).
   */
  readonly rttMs?: number | undefined
  send(message: ServerMessage): void
  /** Ends the connection with the error's close code. */
  fail(code: ErrorCode, detail: string): void
}
