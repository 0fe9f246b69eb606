import type { Clock } from '../../shared/index.js'
import { isFamilyKey, isFamilyShare } from '../config/index.js'
import type { CoordinatorMetrics } from '../observe/index.js'
import { edgeRenewalMs, type LeaseBatch, type Pool } from '../pool/index.js'
import { RoundScheduler } from './scheduler.js'
import type { SettingsSource } from './settings.js'

/** What the rounds read of the coordinator, each time (the pool is replaced on a role change). */
export interface RoundsHost {
  readonly pool: Pool
  readonly settings: SettingsSource
  readonly metrics: CoordinatorMetrics
  readonly closed: boolean
  /** Whether this replica may grant now (a leader past its deadline steps down in it). */
  mayGrant(): boolean
  sendLeases(batches: readonly LeaseBatch[]): void
}

/**
 * The rounds of every resource: when they run (`RoundScheduler`) and what a
 * round does. A keyed family is scheduled as one: its hot keys run in its
 * round, so each client gets one batch for all of them; a key's prompt is
 * its family's. A downstream coordinator reports each round's aggregate up.
 */
export class Rounds {
  readonly #clock: Clock
  readonly #host: RoundsHost
  readonly #scheduler: RoundScheduler

  constructor(clock: Clock, debounceMs: () => number, host: RoundsHost) {
    this.#clock = clock
    this.#host = host
    this.#scheduler = new RoundScheduler(
      clock,
      debounceMs,
      (id) => this.run(id),
      (id) => this.#grantWaiting(id),
      (id) => this.#renewEdges(id),
    )
  }

  /** What is scheduled for a resource: itself, or for a key of a family, the family. */
  scheduleId(resourceId: string): string {
    const s = this.#host.settings.lookup(resourceId)
    return s !== undefined && isFamilyKey(s) ? s.family!.familyId : resourceId
  }

  /** Starts the periodic rounds of a resource (its family's for a key), once. */
  ensure(id: string): void {
    const resourceId = this.scheduleId(id)
    if (this.#host.closed || this.#scheduler.has(resourceId)) return
    const settings = this.#host.settings.lookup(resourceId)
    if (settings === undefined) return
    this.#host.settings.upstream?.link(resourceId, settings.kind, settings.failureMode)
    this.#scheduler.ensure(resourceId, settings.refreshMs)
  }

  /** A round soon for a resource (its family's for a key). */
  prompt(id: string): void {
    this.#scheduler.prompt(this.scheduleId(id))
  }

  /** A config reload: a resource scheduled on its own re-arms its period if it changed, then runs soon. */
  reloaded(id: string, refreshMs: number): void {
    const scheduled = this.scheduleId(id)
    if (scheduled === id) this.#scheduler.reschedule(id, refreshMs)
    this.#scheduler.prompt(scheduled)
  }

  /**
   * Acks grant only whole increases; what they leave waiting that free
   * capacity could partly serve is granted a debounce later, once the
   * round's other acks have had time to come.
   */
  promptWaiting(): void {
    for (const id of this.#host.pool.takeWaiting()) this.#scheduler.promptGrant(this.scheduleId(id))
  }

  /** Stops every schedule (a role change, or close). */
  dropAll(): void {
    for (const id of this.#scheduler.ids()) this.#drop(id)
  }

  /** Runs one round for a resource now. */
  run(resourceId: string): void {
    const { pool, settings, metrics } = this.#host
    this.#scheduler.settlePrompt(resourceId)
    if (!this.#host.mayGrant()) return
    const startedMs = this.#nowMs()
    // A keyed family runs with all its hot keys: one batch per client for all of them.
    const s = settings.lookup(resourceId)
    const ids = s !== undefined && isFamilyShare(s) ? pool.familyIds(resourceId) : undefined
    const batches =
      ids === undefined ? pool.round(resourceId, startedMs) : pool.roundMany(ids, startedMs)
    metrics.rounds.inc({ resource: resourceId })
    metrics.roundSeconds.observe((this.#nowMs() - startedMs) / 1000)
    this.#host.sendLeases(batches)
    // A quota's next window starts with a round at its edge: its leases go out at once.
    const endMs = pool.windowEndMs(resourceId, startedMs)
    // And its leases go again just before that edge, each placing the end anew (edge-renewal.ts).
    if (endMs !== undefined) {
      this.#scheduler.edgeAt(resourceId, endMs + 1)
      this.#scheduler.renewAt(resourceId, endMs - edgeRenewalMs)
    }
    if (
      ids === undefined
        ? !pool.hasResource(resourceId)
        : pool.familyIds(resourceId).every((id) => !pool.hasResource(id))
    )
      return this.#drop(resourceId)
    const upstream = settings.upstream
    if (upstream !== undefined) {
      const { wants, weight } = pool.aggregate(resourceId)!
      upstream.report(resourceId, wants, weight)
      upstream.drained()
    }
  }

  #grantWaiting(resourceId: string): void {
    const { pool, settings } = this.#host
    if (this.#host.closed || !this.#host.mayGrant()) return
    const s = settings.lookup(resourceId)
    this.#host.sendLeases(
      s !== undefined && isFamilyShare(s)
        ? pool.grantWaitingMany(pool.familyIds(resourceId), this.#nowMs())
        : pool.grantWaiting(resourceId, this.#nowMs()),
    )
  }

  #renewEdges(resourceId: string): void {
    const { pool, settings } = this.#host
    if (this.#host.closed || !this.#host.mayGrant()) return
    const s = settings.lookup(resourceId)
    this.#host.sendLeases(
      pool.renewEdges(
        s !== undefined && isFamilyShare(s) ? pool.familyIds(resourceId) : [resourceId],
        this.#nowMs(),
      ),
    )
  }

  #drop(resourceId: string): void {
    if (this.#scheduler.drop(resourceId)) this.#host.settings.upstream?.unlink(resourceId)
  }

  #nowMs(): number {
    return this.#clock.now()
  }
}
