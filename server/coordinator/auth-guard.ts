import type { Logger } from 'pino'
import { KeyedLimiter, TokenBucketLimiter } from '../../shared/limiters/index.js'
import type { Clock } from '../../shared/index.js'
import type { Limits } from '../config/index.js'
import type { CoordinatorMetrics } from '../observe/index.js'

/** How often at most the guard logs what it refused, ms. */
const logEveryMs = 10_000

/**
 * The key an address is throttled under: an IPv4 address as it is (an
 * IPv4-mapped IPv6 one too), an IPv6 address by its /64, the block one
 * site or host gets, so rotating through addresses of it does not buy new
 * attempts.
 */
export function throttleKey(address: string | undefined): string {
  if (address === undefined) return '?'
  const mapped = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/i.exec(address)
  if (mapped !== null) return mapped[1]!
  if (!address.includes(':')) return address
  // Expand `::` to the missing groups, then keep the first four.
  const [head = '', tail] = address.split('%')[0]!.toLowerCase().split('::')
  const left = head === '' ? [] : head.split(':')
  const right = tail === undefined || tail === '' ? [] : tail.split(':')
  const groups =
    tail === undefined
      ? left
      : [...left, ...Array<string>(8 - left.length - right.length).fill('0'), ...right]
  return `${groups
    .slice(0, 4)
    .map((g) => g.replace(/^0+(?=.)/, ''))
    .join(':')}::/64`
}

/**
 * Slows token guessing: every failed authentication from a source address
 * spends a token of that address's bucket (`authFailuresPerSec`, burst
 * `authFailureBurst`); an address with none left is refused before its
 * token is even looked at. Addresses are keyed by `throttleKey` (an IPv6
 * /64 as one). Sluice's own keyed limiter holds the buckets, so memory is
 * bounded (least recently used addresses go first). A reload keeps the
 * buckets (new ones take the new limits). Refusals are counted in metrics
 * and logged at most once per ten seconds.
 */
export class AuthGuard {
  readonly #buckets: KeyedLimiter<string>
  readonly #clock: Clock
  readonly #log: Logger
  readonly #metrics: CoordinatorMetrics
  #lastLogMs = -Infinity
  #unlogged = 0

  constructor(limits: () => Limits, clock: Clock, log: Logger, metrics: CoordinatorMetrics) {
    this.#clock = clock
    this.#log = log
    this.#metrics = metrics
    this.#buckets = new KeyedLimiter(
      () =>
        new TokenBucketLimiter({
          ratePerSec: limits().authFailuresPerSec,
          burst: limits().authFailureBurst,
          clock,
        }),
      { maxKeys: 10_000, idleMs: 600_000, clock },
    )
  }

  /** Whether an attempt from `address` may be checked now. */
  mayTry(address: string | undefined, surface: 'websocket' | 'http'): boolean {
    if ((this.#buckets.remaining(throttleKey(address)) ?? 1) >= 1) return true
    this.#metrics.authThrottled.inc({ surface })
    this.#note(address, 'throttled')
    return false
  }

  /** An attempt from `address` failed. */
  failed(address: string | undefined, surface: 'websocket' | 'http'): void {
    this.#buckets.tryAcquire(throttleKey(address))
    this.#metrics.authFailures.inc({ surface })
    this.#note(address, 'failed')
  }

  #note(address: string | undefined, what: string): void {
    this.#unlogged++
    const now = this.#clock.now()
    if (now - this.#lastLogMs < logEveryMs) return
    this.#log.warn(
      { address, what, attempts: this.#unlogged },
      'failed or throttled authentication (logged at most every 10 s)',
    )
    this.#lastLogMs = now
    this.#unlogged = 0
  }
}
