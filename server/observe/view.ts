import type { Clock, ResourceKind } from '../../shared/index.js'
import { isFamilyKey, isFamilyShare } from '../config/index.js'
import type { ClientSnapshot, KeyLookup, Pool } from '../pool/index.js'

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
  /** Quota: the window in force, what was used of it and what remains. */
  readonly quota?: QuotaFigures | undefined
}

/** A quota's current window, as status and metrics show it. */
export interface QuotaFigures {
  readonly window: number
  readonly lengthMs: number
  readonly endsInMs: number
  /** Units the clients reported used in the window (their reports lag by up to a refresh). */
  readonly used: number
  /** capacity − used, never below 0: not all of it is free (blocks out are committed). */
  readonly remaining: number
}

/** One hot key of a family. */
export interface KeyFigures {
  readonly key: string
  readonly capacity: number
  readonly committed: number
  readonly demand: number
  readonly clients: number
  /** A keyed quota's key: what the processes reported used of it in the window so far. */
  readonly used?: number
}

/** A keyed family as status shows it. */
export interface FamilyFigures {
  /** Its template's match, `<prefix>/*`. */
  readonly id: string
  readonly prefix: string
  readonly kind: ResourceKind
  /** A key's capacity unless the plan says otherwise. */
  readonly keyCapacity: number
  /** Processes holding (or asking for) a default share. */
  holders: number
  /** Keys leased one by one now. */
  hotKeys: number
  readonly maxHotKeys: number
  /** The most demanded hot keys. */
  readonly keys: readonly KeyFigures[]
  /** A keyed quota: the window in force, and when it ends. */
  window?: { readonly index: number; readonly lengthMs: number; readonly endsInMs: number }
}

/** A family with what its processes report of every key together (Observer.families). */
export interface FamilyUsageFigures extends FamilyFigures {
  admittedPerSec: number
  refusedPerSec: number
  /** A keyed quota: units admitted across its keys in the window in force, as reported. */
  windowUsed?: number
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

  /**
   * Every resource with clients, sorted by id; the keys of keyed families
   * are left out (they are many: `families()` sums them up), so metrics and
   * history never get a series per key.
   */
  resources(): ResourceFigures[] {
    const pool = this.#pool()
    const nowMs = this.#clock.now()
    const out: ResourceFigures[] = []
    for (const id of pool.resourceIds()) {
      const settings = pool.settings(id)
      if (settings !== undefined && isFamilyKey(settings)) continue
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

  /** One key of a keyed family now (GET /v1/key, `sluice key`); undefined without such a family. */
  key(prefix: string, key: string): KeyLookup | undefined {
    return this.#pool().keyLookup(prefix, key, this.#clock.now())
  }

  /**
   * The family whose default shares `id` is the resource of, and its window's end now (a
   * keyed quota); undefined for any other resource.
   */
  familyShare(id: string): { familyId: string; windowEndMs: number | undefined } | undefined {
    const pool = this.#pool()
    const settings = pool.settings(id)
    if (settings === undefined || !isFamilyShare(settings)) return undefined
    return {
      familyId: settings.family!.familyId,
      windowEndMs: pool.windowEndMs(id, this.#clock.now()),
    }
  }

  /** How many keys of a family are leased on their own now. */
  hotKeyCount(familyId: string): number {
    return this.#pool().hotKeyCount(familyId)
  }

  /** Σ committed of one resource now. */
  committed(id: string): number {
    return this.#pool().committed(id, this.#clock.now())
  }

  /**
   * Each keyed family in use: its holders, and its hot keys (those leased
   * one by one) with the `top` most demanded first.
   */
  families(top = 20): FamilyFigures[] {
    const pool = this.#pool()
    const nowMs = this.#clock.now()
    const byFamily = new Map<string, FamilyFigures & { keys: KeyFigures[] }>()
    for (const id of pool.resourceIds()) {
      const family = pool.settings(id)?.family
      if (family === undefined) continue
      let f = byFamily.get(family.familyId)
      if (f === undefined)
        byFamily.set(
          family.familyId,
          (f = {
            id: family.familyId,
            prefix: family.prefix,
            kind: family.keyKind,
            keyCapacity: family.keyCapacity,
            holders: 0,
            hotKeys: 0,
            maxHotKeys: family.maxHotKeys,
            keys: [],
          }),
        )
      const s = pool.snapshot(id, nowMs)
      if (s === undefined) continue
      if (isFamilyShare(s.settings)) {
        f.holders = s.clients
        if (s.window !== undefined)
          f.window = {
            index: s.window.index,
            lengthMs: s.window.lengthMs,
            endsInMs: s.window.endsInMs,
          }
      } else {
        f.hotKeys++
        f.keys.push({
          key: id.slice(family.prefix.length + 1),
          capacity: s.settings.capacity,
          committed: s.committed,
          demand: s.demand,
          clients: s.clients,
          ...(s.window === undefined ? {} : { used: s.window.used }),
        })
      }
    }
    return [...byFamily.values()]
      .sort((a, b) => (a.id < b.id ? -1 : 1))
      .map((f) => ({ ...f, keys: f.keys.sort((a, b) => b.demand - a.demand).slice(0, top) }))
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
      // A keyed quota's own resource is its holders' shares of every key, not a budget: its
      // keys' use is in families().
      ...(s.window === undefined || isFamilyShare(s.settings)
        ? {}
        : {
            quota: {
              window: s.window.index,
              lengthMs: s.window.lengthMs,
              endsInMs: s.window.endsInMs,
              used: s.window.used,
              remaining: Math.max(0, s.settings.capacity - s.window.used),
            },
          }),
    }
  }
}
