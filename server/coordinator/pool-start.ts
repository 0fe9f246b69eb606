import type { Clock } from '../../shared/index.js'
import {
  restoredUntilFor,
  writtenBeforeLast,
  type Ledger,
  type LedgerEntry,
} from '../ledger/index.js'
import { Pool } from '../pool/index.js'
import { QuotaWindows } from './quota-clock.js'
import type { SettingsSource } from './settings.js'

/**
 * What a coordinator's pool starts from, and so how far it trusts what
 * clients claim: a trusted ledger's entries (restored: no learning), or
 * nothing (learning for the resources' learning periods from `startedMs`).
 * A pool is made anew on every change of role or ledger.
 */
/** Most of a process's own start (to its ledger) that a windows' resume credits (QuotaWindows.resume). */
const maxStartingMs = 10_000

export class PoolStart {
  readonly #clock: Clock
  readonly #settings: SettingsSource
  readonly #ledger: () => Ledger | undefined
  #startedMs: number
  /** Quota windows on this process's monotonic clock, for every pool it makes (no clock step re-opens one). */
  readonly #windows: QuotaWindows
  #restored = false
  /**
   * How long this process had been starting when it attached its ledger (0 when elected: it
   * ran as a follower): not downtime, so not counted against the windows' resume (QuotaWindows).
   */
  #startingMs = 0
  /** Its ledger was new (nothing was ever leased from it): a first lease may start full. */
  #neverLeased = false

  constructor(clock: Clock, settings: SettingsSource, ledger: () => Ledger | undefined) {
    this.#clock = clock
    this.#settings = settings
    this.#ledger = ledger
    this.#startedMs = clock.now()
    this.#windows = new QuotaWindows(clock)
  }

  /** Whether the pool started from a trusted ledger (no learning). */
  get restored(): boolean {
    return this.#restored
  }

  /** What is left of the learning period (0 once restored or over). */
  get learningLeftMs(): number {
    if (this.#restored) return 0
    const endMs = this.#startedMs + this.#settings.config.maxLearningMs()
    return Math.max(0, endMs - this.#clock.now())
  }

  /** Elected: a pool from now, restored from `entries` or learning (a previous leader may have leased anything). */
  elected(restored: boolean): Pool {
    this.#startedMs = this.#clock.now()
    this.#startingMs = 0
    this.#restored = restored
    this.#neverLeased = false
    return this.pool()
  }

  /** A ledger attached: restored from its entries, or (untrusted) learning as without one. */
  attached(ledger: Ledger, restored: boolean): Pool {
    // The real clock's monotonic reading counts from the process's start.
    this.#startingMs = Math.min(Math.max(0, this.#clock.now()), maxStartingMs)
    this.#restored = restored
    // A ledger never written before, trusted: nothing was ever leased, so no bucket anywhere
    // holds a token of any resource.
    this.#neverLeased = ledger.fresh && restored
    return this.pool()
  }

  /** A client witnessed a ledger this one does not know: learning now, as from the start. */
  distrusted(pool: Pool): void {
    this.#restored = false
    pool.learnFromStart()
  }

  /** How far the wall clock is ahead of the quota windows' clock now (0 when they agree). */
  windowLagMs(): number {
    return this.#windows.lagMs()
  }

  /** A new, empty pool as this start says. */
  pool(): Pool {
    const ledger = this.#ledger()
    return new Pool(this.#startedMs, this.#settings.lookup, {
      learn: !this.#restored,
      track: ledger !== undefined,
      sendDelayMs:
        ledger?.synchronous === false ? this.#settings.config.config.server.ledgerMaxWriteMs : 0,
      quotaClock: this.#windows.at,
      // From now on the pool sees every lease (before: what the ledger restored, or learning).
      quietSinceMs: this.#neverLeased ? -Infinity : this.#clock.now(),
    })
  }

  /**
   * Fills `pool` from a ledger's entries (`restoredUntilFor`); how many it
   * took. First, each quota window the entries were leased in is held until
   * it has surely ended on the writer's clock (QuotaWindows.hold): its end
   * less the writer's last write, from now. The windows resume where the
   * last write's stamp says (QuotaWindows.resume), crediting how long that
   * writer's writes were taking.
   */
  restore(pool: Pool, entries: readonly LedgerEntry[]): number {
    const nowMs = this.#clock.now()
    const nowWallMs = this.#clock.wallNow()
    const before = writtenBeforeLast(entries)
    let lastMs = -Infinity
    /** How long the last write's writer was taking to write (`LedgerEntry.writeLatencyMs`). */
    let latencyMs = 0
    for (const e of entries) {
      if (e.writtenMs !== undefined) {
        const atMs = e.writtenMs + before(e) - (e.windowLagMs ?? 0)
        if (atMs > lastMs || (atMs === lastMs && (e.writeLatencyMs ?? 0) > latencyMs))
          latencyMs = e.writeLatencyMs ?? 0
        lastMs = Math.max(lastMs, atMs)
      }
      if (e.leaseWindow === undefined) continue
      const spec = this.#settings.lookup(e.resource)?.quotaWindow
      if (spec !== undefined) this.#windows.hold(spec, e.leaseWindow)
    }
    // Its last sign of life beside the ledger (a file's, `markAlive`), when later: where its
    // windows' clock stood then, no write's latency to credit.
    const alive = this.#ledger()?.aliveWindowsMs
    if (alive !== undefined && lastMs > -Infinity && alive > lastMs) {
      lastMs = alive
      latencyMs = 0
    }
    if (lastMs > -Infinity) this.#windows.resume(lastMs, this.#startingMs, latencyMs)
    return pool.restore(entries, restoredUntilFor(entries, nowWallMs, nowMs), nowMs)
  }
}
