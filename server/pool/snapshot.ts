import type { ResourceSettings } from '../config/index.js'

/** One resource as the pool sees it at one instant: figures only, frozen. */
export interface ResourceSnapshot {
  readonly id: string
  readonly settings: ResourceSettings
  /** Σ committed: what the pool may be held to (≤ capacity, but after a cut until the excess drains). */
  readonly committed: number
  /** Σ estimated demand of the connected clients. */
  readonly demand: number
  /** Σ target grants of the last round. */
  readonly grant: number
  readonly clients: number
  readonly learning: boolean
  readonly rounds: number
  /** Quota: the window in force and what the clients reported used of it. */
  readonly window?: QuotaWindowSnapshot | undefined
}

/** A quota's current window as the pool sees it. */
export interface QuotaWindowSnapshot {
  /** Its number (ms since the epoch ÷ its length, for windows aligned to the epoch). */
  readonly index: number
  /** Time left in it. */
  readonly endsInMs: number
  readonly lengthMs: number
  /** Σ what the clients reported used in it, replaced processes included. */
  readonly used: number
}

/** One client of one resource as the pool sees it at one instant. */
export interface ClientSnapshot {
  readonly id: string
  readonly tenant: string | undefined
  readonly connected: boolean
  /** The most recent report. */
  readonly wants: number
  /** What the next round allocates against. */
  readonly estimatedDemand: number
  readonly target: number
  /** Capacity of the newest lease sent; 0 before any. */
  readonly lease: number
  readonly committed: number
  readonly weight: number
  readonly priority: number
  /** When the newest lease was sent; -Infinity before any. */
  readonly lastSentMs: number
}
