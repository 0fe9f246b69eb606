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

/** One key of a keyed family as the pool knows it now (`PoolView.keyLookup`). */
export interface KeyLookup {
  /** The family's id, `<prefix>/*`. */
  readonly family: string
  readonly key: string
  readonly kind: ResourceSettings['kind']
  /** The key's limit: the plan's, else the family's. */
  readonly capacity: number
  readonly burst: number
  /** A keyed quota: the window in force. */
  readonly window?: { readonly index: number; readonly lengthMs: number; readonly endsInMs: number }
  /** Leased on its own now (hot): each holder enforces its own lease of it; else its default share. */
  readonly leasedOnItsOwn: boolean
  /** Each process that may use some of the key now, and how much (in the key's units). */
  readonly holders: readonly KeyHolder[]
  /** Σ what the holders may be held to of the key now. */
  readonly committed: number
  /**
   * A keyed quota's key leased on its own: what the holders reported used of it in the
   * window. Absent otherwise: on default shares each process counts its own use and reports
   * none (it says so at a clean close).
   */
  readonly used?: number
  /**
   * A keyed quota's key reset in this window (reset.ts): `pending` until it takes effect,
   * then the units given back (what the holders had reported used), so the key may use
   * `capacity + givenBack − used` more in the window.
   */
  readonly reset?: { readonly pending: boolean; readonly givenBack: number }
}

/** One holder of a key (`KeyLookup.holders`). */
export interface KeyHolder {
  readonly client: string
  readonly tenant: string | undefined
  readonly connected: boolean
  /** What its newest lease lets it use of the key: its own lease, or its default share's part. */
  readonly capacity: number
  readonly committed: number
  /** A keyed quota's key leased on its own: what it reported used in the window. */
  readonly used?: number
}
