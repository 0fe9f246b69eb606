import type { Clock, Timer } from '../../shared/index.js'
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
 * A family's round runs its hot keys in slices of about this much work each, a turn of the
 * event loop apart, so the coordinator answers between them (#41: a round of 190 hot keys
 * held every remote decision of its moment for 2-16 ms, once a second; 10,000 hot keys take
 * about 400 ms). Read through the injected clock: a manual clock stands still within a
 * round, so under one a family's round is whole, in one turn. 5 ms, not 1: with slices of
 * 1 ms, 30 gateways starting together (a batch and an ack per slice per client, the round
 * drawn out behind the joins' frames) admitted 0.5-2.9 points less with remote decisions, in
 * each of three alternated runs; with 5 ms, as before (docs/benchmarks.md).
 */
export const roundSliceMs = 5

/**
 * ...and in at most this many slices: each slice is a lease batch, and so an ack, per client it
 * leases, and a client may send `limits.maxMessagesPerSec` (50) messages a second. A family
 * whose round takes longer than this many slices of `roundSliceMs` has longer slices.
 */
export const maxRoundSlices = 8

/** A family's round under way in slices: its ids (the family first), and how far it is. */
interface Pass {
  readonly ids: readonly string[]
  next: number
  timer: Timer | undefined
  /** A round was asked for while this one ran: another follows it at once. */
  again: boolean
  /** The slices' work so far (what `sluice_round_seconds` observes for the round). */
  workMs: number
}

/**
 * The rounds of every resource: when they run (`RoundScheduler`) and what a
 * round does. A keyed family is scheduled as one: its hot keys run in its
 * round, so each client gets one batch for all of them (one per slice when
 * the round takes more than `roundSliceMs`); a key's prompt is its family's.
 * A downstream coordinator reports each round's aggregate up.
 */
export class Rounds {
  readonly #clock: Clock
  readonly #host: RoundsHost
  readonly #scheduler: RoundScheduler
  /** Families whose round is under way in slices. */
  readonly #passes = new Map<string, Pass>()

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
    for (const pass of this.#passes.values()) pass.timer?.cancel()
    this.#passes.clear()
  }

  /**
   * Runs one round for a resource now; a keyed family's with its hot keys, in slices when it
   * takes longer than `roundSliceMs` (the first slice now). Asked again while a family's
   * round is under way in slices, another follows it once it is done.
   */
  run(resourceId: string): void {
    const { pool, settings } = this.#host
    this.#scheduler.settlePrompt(resourceId)
    if (!this.#host.mayGrant()) return
    const s = settings.lookup(resourceId)
    if (s === undefined || !isFamilyShare(s)) {
      const startedMs = this.#nowMs()
      const batches = pool.round(resourceId, startedMs)
      this.#observe(resourceId, this.#nowMs() - startedMs)
      this.#host.sendLeases(batches)
      this.#after(resourceId, false, startedMs)
      return
    }
    const pass = this.#passes.get(resourceId)
    if (pass !== undefined) {
      pass.again = true
      return
    }
    const ids = pool.familyIds(resourceId)
    this.#passes.set(resourceId, { ids, next: 0, timer: undefined, again: false, workMs: 0 })
    this.#slice(resourceId)
  }

  /** The next slice of a family's round; the next one a turn later, or the round's end. */
  #slice(familyId: string): void {
    const pass = this.#passes.get(familyId)
    if (pass === undefined) return
    pass.timer = undefined
    if (this.#host.closed || !this.#host.mayGrant()) {
      this.#passes.delete(familyId)
      return
    }
    const startedMs = this.#nowMs()
    // At least an even part of the ids each slice, so a round is at most maxRoundSlices.
    const minIds = Math.ceil(pass.ids.length / maxRoundSlices)
    let ran = 0
    const { batches, next } = this.#host.pool.roundSome(
      pass.ids,
      pass.next,
      startedMs,
      () => ++ran < minIds || this.#nowMs() - startedMs < roundSliceMs,
    )
    pass.next = next
    pass.workMs += this.#nowMs() - startedMs
    this.#host.sendLeases(batches)
    if (next < pass.ids.length) {
      // A timer of 0: the sockets' frames that came meanwhile are read before the next slice.
      pass.timer = this.#clock.setTimeout(() => this.#slice(familyId), 0)
      return
    }
    this.#passes.delete(familyId)
    this.#observe(familyId, pass.workMs)
    this.#after(familyId, true, startedMs)
    if (pass.again && this.#scheduler.has(familyId)) this.run(familyId)
  }

  #observe(resourceId: string, workMs: number): void {
    this.#host.metrics.rounds.inc({ resource: resourceId })
    this.#host.metrics.roundSeconds.observe(workMs / 1000)
  }

  /** What follows a round: a quota's edge and renewal armed, an empty schedule dropped, the aggregate up. */
  #after(resourceId: string, family: boolean, startedMs: number): void {
    const { pool, settings } = this.#host
    // A quota's next window starts with a round at its edge: its leases go out at once.
    const endMs = pool.windowEndMs(resourceId, startedMs)
    // And its leases go again just before that edge, each placing the end anew (edge-renewal.ts).
    if (endMs !== undefined) {
      this.#scheduler.edgeAt(resourceId, endMs + 1)
      this.#scheduler.renewAt(resourceId, endMs - edgeRenewalMs)
    }
    if (
      !family
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
    const pass = this.#passes.get(resourceId)
    if (pass !== undefined) {
      pass.timer?.cancel()
      this.#passes.delete(resourceId)
    }
    if (this.#scheduler.drop(resourceId)) this.#host.settings.upstream?.unlink(resourceId)
  }

  #nowMs(): number {
    return this.#clock.now()
  }
}
