import { systemClock, type Clock } from '../clock.js'
import { positiveOption, type Limiter, type LimiterAcquireOptions } from './base.js'

export interface KeyedOptions {
  /** Most keys held; the least recently used goes first. Default 10 000. */
  readonly maxKeys?: number | undefined
  /** A key unused this long is forgotten (it starts fresh if it comes back). Default 10 minutes. */
  readonly idleMs?: number | undefined
  readonly clock?: Clock | undefined
}

interface Slot {
  readonly limiter: Limiter
  lastUsedMs: number
  /** When it was last moved to the recent end of the order. */
  movedMs: number
}

/**
 * One limiter per key (per IP, per user, per route) from a factory, with
 * memory bounded by `maxKeys` (least recently used evicted) and idle keys
 * forgotten after `idleMs`.
 */
export class KeyedLimiter<K = string> {
  readonly #factory: (key: K) => Limiter
  readonly #maxKeys: number
  readonly #idleMs: number
  readonly #clock: Clock
  readonly #touchMs: number
  // Map iteration order is insertion order: re-inserting on use keeps it least-recently-used first.
  readonly #slots = new Map<K, Slot>()

  constructor(factory: (key: K) => Limiter, options: KeyedOptions = {}) {
    this.#factory = factory
    this.#maxKeys = Math.floor(positiveOption('KeyedLimiter', 'maxKeys', options.maxKeys ?? 10_000))
    this.#idleMs = positiveOption('KeyedLimiter', 'idleMs', options.idleMs ?? 600_000)
    this.#clock = options.clock ?? systemClock
    this.#touchMs = Math.min(1000, this.#idleMs / 10)
  }

  /** Keys held now. */
  get size(): number {
    return this.#slots.size
  }

  /** The key's limiter (made if new), marked as just used. */
  get(key: K): Limiter {
    return this.#slot(key)
  }

  tryAcquire(key: K, cost = 1): boolean {
    return this.#slot(key).tryAcquire(cost)
  }

  acquire(key: K, cost = 1, options?: LimiterAcquireOptions): Promise<void> {
    return this.#slot(key).acquire(cost, options)
  }

  msUntil(key: K, cost = 1): number {
    return this.#slot(key).msUntil(cost)
  }

  /** Whole tokens the key's limiter could take now, where it can tell. */
  remaining(key: K): number | undefined {
    return this.#slot(key).remaining?.()
  }

  #slot(key: K): Limiter {
    const now = this.#clock.now()
    let slot = this.#slots.get(key)
    if (slot !== undefined) {
      if (now - slot.lastUsedMs < this.#idleMs) {
        // The hit path: moved to the recent end only when it last moved a while ago (the order
        // is least recently used to within touchMs), no sweep, no allocation.
        if (now - slot.movedMs >= this.#touchMs) {
          this.#slots.delete(key)
          this.#slots.set(key, slot)
          slot.movedMs = now
        }
        slot.lastUsedMs = now
        return slot.limiter
      }
      this.#slots.delete(key)
    }
    slot = { limiter: this.#factory(key), lastUsedMs: now, movedMs: now }
    this.#slots.set(key, slot)
    // A new key: evict idle keys from the old end, then the least recently used beyond the bound.
    for (const [k, s] of this.#slots) {
      if (this.#slots.size <= this.#maxKeys && now - s.lastUsedMs < this.#idleMs) break
      if (k === key) break
      this.#slots.delete(k)
    }
    return slot.limiter
  }
}
