import type { EventEmitter } from 'node:events'

/** What a running coordinator tells its embedder. */
export interface CoordinatorEvents {
  /** A config was applied (after a reload or a file change). */
  'config-applied': [summary: { resources: number; tenants: number }]
  /** A config was refused; the old one stays. */
  'config-rejected': [error: unknown]
  /** The watcher saw the config file change; it reloads 200 ms later, on the clock. */
  'config-file-changed': []
  /** An election changed this replica's role: the advertised URL, or why it stepped down. */
  role: [role: 'leader' | 'follower', detail: string]
}

export type CoordinatorEventEmitter = EventEmitter<CoordinatorEvents>
