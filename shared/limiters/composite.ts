import { systemClock, type Clock } from '../clock.js'
import { SluiceError } from '../errors.js'
import { BaseLimiter, type Limiter } from './base.js'

/**
 * Several limits at once (say 5/s and 100k/h), debited atomically: a check
 * takes from every part or from none. Parts are checked with `msUntil` first
 * (no side effect), then taken; in one JavaScript turn nothing can come in
 * between, so the takes cannot fail halfway.
 */
export class CompositeLimiter extends BaseLimiter {
  readonly #parts: readonly Limiter[]
  constructor(parts: readonly Limiter[], clock: Clock = systemClock) {
    super(clock)
    if (parts.length === 0)
      throw new SluiceError(
        'SLUICE_ERR_OPTION_INVALID',
        'CompositeLimiter: parts must hold at least one limiter, received []',
      )
    this.#parts = Object.freeze([...parts])
  }
  protected take(cost: number): boolean {
    for (const p of this.#parts) if (p.msUntil(cost) > 0) return false
    for (const p of this.#parts) {
      // Cannot fail after the check above; if a part disagrees with its own msUntil, that is a bug.
      if (!p.tryAcquire(cost))
        throw new Error('CompositeLimiter: a part refused after msUntil said 0')
    }
    return true
  }
  msUntil(cost = 1): number {
    let max = 0
    for (const p of this.#parts) max = Math.max(max, p.msUntil(cost))
    return max
  }
}
