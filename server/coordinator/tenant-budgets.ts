import type { Clock } from '../../shared/index.js'
import { TokenBucket } from '../../shared/limiters/index.js'

/**
 * The entries a tenant's connections may still send together: the work one
 * tenant can cause per second, whatever number of connections it opens.
 * One bucket per configured tenant (a bounded set); a new rate makes a new bucket.
 */
export class TenantBudgets {
  readonly #clock: Clock
  readonly #ratePerSec: () => number
  readonly #budgets = new Map<string, TokenBucket>()

  constructor(clock: Clock, ratePerSec: () => number) {
    this.#clock = clock
    this.#ratePerSec = ratePerSec
  }

  /** Takes `entries` from the tenant's budget; false when it has not that many left. */
  tryTake(tenant: string, entries: number): boolean {
    let budget = this.#budgets.get(tenant)
    const rate = this.#ratePerSec()
    if (budget === undefined || budget.ratePerSec !== rate) {
      budget = new TokenBucket(this.#clock, rate, 2 * rate)
      this.#budgets.set(tenant, budget)
    }
    return budget.tryTake(entries)
  }

  /** Milliseconds until the tenant's budget has `entries` again (0 without a budget yet). */
  msUntil(tenant: string, entries: number): number {
    return this.#budgets.get(tenant)?.msUntil(entries) ?? 0
  }
}
