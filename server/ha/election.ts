import type { EventEmitter } from 'node:events'

/**
 * A leader election as the coordinator sees it. Events:
 * - `elected`: this replica leads, from now until `deposed`.
 * - `deposed` (reason): it may no longer lead; stop granting at once.
 * - `leader` (url | undefined): who leads, as observed (a follower redirects there).
 */
export interface LeaderElection extends EventEmitter {
  /** The URL this replica advertises when it leads. */
  readonly advertiseUrl: string
  /**
   * Until when (on the coordinator's clock) this replica surely still leads:
   * -Infinity when it does not. A leader checks it before it grants anything,
   * so a process that resumes from a long pause (GC, SIGSTOP, a stalled VM)
   * steps down before it sends a lease, whatever order its timers and
   * sockets wake up in.
   */
  leadingUntilMs(): number
  /** Starts campaigning and observing; returns at once. */
  start(): void
  /** Stops campaigning, resigning if leading, so a successor takes over without waiting out a TTL. */
  close(): Promise<void>
}
