import type { Permit } from '../enforcer.js'
import type { RemoteAnswer } from '../remote.js'
import type { KeyedFamily } from './family.js'

/**
 * One key of a family seen as a shared limit (what the HTTP edge uses for a
 * resource): the family's own cursor is moved from key to key without
 * allocating; `detach` makes one that stays on its key (for a wait).
 */
export class KeyView {
  readonly #family: KeyedFamily
  key = ''

  constructor(family: KeyedFamily, key: string) {
    this.#family = family
    this.key = key
  }

  /** The name the HTTP headers give this limit: the family's prefix. */
  get id(): string {
    return this.#family.prefix
  }

  tryAcquire(cost = 1): boolean {
    return this.#family.tryAcquire(this.key, cost)
  }

  /** `KeyedFamily.decide`: decided here (true, false), or the coordinator's answer to come. */
  decide(cost = 1): boolean | Promise<RemoteAnswer> {
    return this.#family.decide(this.key, cost)
  }

  msUntil(cost = 1): number {
    return this.#family.msUntil(this.key, cost)
  }

  acquire(
    cost = 1,
    options: { maxWaitMs?: number | undefined; signal?: AbortSignal | undefined } = {},
  ): Promise<Permit> {
    return this.#family.acquire(this.key, cost, options)
  }

  /** The key's configured limit, what a caller is held to (not this process's share of it). */
  describe(): { ratePerSec: number; burst: number; windowSec?: number } {
    const limits = this.#family.limitOf(this.key)
    const windowSec = this.#family.windowSec
    // A quota's limit is a budget per window.
    if (windowSec !== undefined)
      return { ratePerSec: limits.capacity / windowSec, burst: limits.capacity, windowSec }
    return { ratePerSec: limits.capacity, burst: limits.burst }
  }

  remaining(): number {
    return this.#family.remaining(this.key)
  }

  /** What the key has left across the cluster, as well as this process knows it (family.ts). */
  clusterRemaining(): number {
    return this.#family.clusterRemaining(this.key)
  }

  msUntilReset(): number {
    return this.#family.msUntilFull(this.key)
  }

  detach(): KeyView {
    return new KeyView(this.#family, this.key)
  }
}
