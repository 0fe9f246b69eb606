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
  /** Starts campaigning and observing; returns at once. */
  start(): void
  /** Stops campaigning, resigning if leading, so a successor takes over without waiting out a TTL. */
  close(): Promise<void>
}
