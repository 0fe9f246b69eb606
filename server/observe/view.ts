import type { Clock, ResourceKind } from '../../shared/index.js'
import type { ClientSnapshot, Pool } from '../pool/index.js'

/** One resource's figures, as status and metrics show them. */
export interface ResourceFigures {
  readonly id: string
  readonly kind: ResourceKind
  readonly capacity: number
  readonly committed: number
  /** capacity − committed, never below 0. */
  readonly free: number
  readonly demand: number
  /** Σ target grants of the last round. */
  readonly grant: number
  readonly clients: number
  readonly learning: boolean
  readonly rounds: number
}

/**
 * A read-only view of the coordinator's resources for the status API and
 * the metrics: the same figures for both, worked out from the pool's
 * snapshots at the moment of the call.
 */
export class ResourceView {
  readonly #pool: () => Pool
  readonly #clock: Clock

  constructor(pool: () => Pool, clock: Clock) {
    this.#pool = pool
    this.#clock = clock
  }

  /** Every resource with clients, sorted by id. */
  resources(): ResourceFigures[] {
    const pool = this.#pool()
    const nowMs = this.#clock.now()
    const out: ResourceFigures[] = []
    for (const id of pool.resourceIds()) {
      const figures = this.#figures(pool, id, nowMs)
      if (figures !== undefined) out.push(figures)
    }
    return out.sort((a, b) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0))
  }

  /** One resource, or undefined when nobody uses it. */
  resource(id: string): ResourceFigures | undefined {
    return this.#figures(this.#pool(), id, this.#clock.now())
  }

  /** Each client of a resource. */
  clients(id: string): ClientSnapshot[] {
    return this.#pool().clientSnapshots(id, this.#clock.now())
  }

  /** Σ committed of one resource now. */
  committed(id: string): number {
    return this.#pool().committed(id, this.#clock.now())
  }

  #figures(pool: Pool, id: string, nowMs: number): ResourceFigures | undefined {
    const s = pool.snapshot(id, nowMs)
    if (s === undefined) return undefined
    return {
      id,
      kind: s.settings.kind,
      capacity: s.settings.capacity,
      committed: s.committed,
      free: Math.max(0, s.settings.capacity - s.committed),
      demand: s.demand,
      grant: s.grant,
      clients: s.clients,
      learning: s.learning,
      rounds: s.rounds,
    }
  }
}
