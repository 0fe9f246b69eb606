import { copySettings } from '../config/index.js'
import type { LedgerChange, LedgerEntry, LedgerStamp } from '../ledger/index.js'
import { flush } from './batches.js'
import {
  acknowledge,
  type FallHeld,
  aggregate,
  connect,
  disconnect,
  learnHoldings,
  release,
  reportDemand,
  unsent,
  type ConnectOutcome,
  type DemandReport,
  type Holding,
  type HeldReport,
  type SpentReport,
} from './clients.js'
import { reserveFull, reserveSpend } from './central-spend.js'
import { renewEdges } from './edge-renewal.js'
import { grantIncreases } from './increases.js'
import { ledgerEntries, restoreEntries, takeChanges } from './ledger-projection.js'
import { PoolView } from './queries.js'
import { resetKey, type KeyResetOutcome } from './reset.js'
import { burstRefillMs, unsettledSlack } from './registry.js'
import { round, sweepResource } from './rounds.js'
import { shapeOf } from './shapes/index.js'
import {
  PoolState,
  noBatches,
  noResources,
  type LeaseBatch,
  type PoolOptions,
  type SettingsLookup,
} from './state.js'

export type { ConnectOutcome, DemandReport, Holding } from './clients.js'
export type { KeyResetOutcome } from './reset.js'
export { clientKey } from './state.js'
export type { LeaseBatch, QuotaClock, SettingsLookup } from './state.js'

/**
 * Lease bookkeeping for every resource and client of one coordinator. Pure:
 * every method takes `nowMs`; no timers, no I/O. It returns the lease
 * batches to send, and counts each one as committed the moment it returns it
 * (a batch lost on the way only lapses).
 *
 * The invariant (docs/protocol.md, "What the coordinator counts"): per
 * resource, Σ committed ≤ capacity, where a client's committed capacity is
 * the largest of its leases that is neither replaced (a newer one
 * acknowledged) nor lapsed (ttl + grace after sending), and after a lapse its
 * safe fallback until the safe hold ends. Decreases are sent at once but free
 * capacity only on ack or lapse; increases come only out of free capacity.
 * After a capacity cut the sum may stand above the new capacity until the
 * decreases are acknowledged or lapse; no increase is granted until it is
 * back under, and what silent clients hold is kept out of what is shared.
 *
 * Settings come in one way, from the `SettingsLookup` given at construction
 * (`refreshSettings` re-reads them); state goes out as frozen snapshots,
 * never as the pool's own records (`PoolView`, queries.ts).
 *
 * This class is the facade of the pool's rooms (docs/architecture.md, The
 * pool): the state (state.ts), the registry (registry.ts), what a client's
 * messages do (clients.ts), rounds (rounds.ts) by the resource's shape
 * (shapes/), increases (increases.ts), a lease's way out (lease-out.ts,
 * batches.ts), a family's hot keys (hot-keys.ts), and the ledger's view
 * (ledger-projection.ts). Every method that may send leases returns the
 * batches it made.
 */
export class Pool extends PoolView {
  constructor(startMs: number, settingsFor: SettingsLookup, options: PoolOptions = {}) {
    super(new PoolState(startMs, settingsFor, shapeOf, options))
  }

  /**
   * Starts learning now, as a pool without a trusted ledger would have from
   * its start: every resource (and any that appears later) grants nothing
   * new until its learning period from the start ends. What the ledger
   * restored stays counted.
   */
  learnFromStart(): void {
    const pool = this.state
    pool.learn = true
    for (const r of pool.resources.values())
      r.learningUntilMs = Math.max(r.learningUntilMs, pool.startMs + r.settings.learningMs)
  }

  // ---- the ledger (ledger-projection.ts) ----

  /** What changed since the last call, as the ledger keeps it (wall-clock times through `toWallMs`). */
  takeChanges(toWallMs: (monoMs: number) => number, stamp: LedgerStamp = {}): LedgerChange[] {
    return takeChanges(this.state, toWallMs, stamp)
  }

  /** Every entry as the ledger keeps it, what is not yet taken included (a compaction's snapshot). */
  ledgerEntries(toWallMs: (monoMs: number) => number, stamp: LedgerStamp = {}): LedgerEntry[] {
    return ledgerEntries(this.state, toWallMs, stamp)
  }

  /** Starts from what a ledger kept (see `restoreEntries`); returns how many entries it took. */
  restore(
    entries: readonly LedgerEntry[],
    toMonoMs: (wallMs: number, entry: LedgerEntry) => number,
    nowMs: number,
  ): number {
    const restored = restoreEntries(this.state, entries, toMonoMs, nowMs)
    for (const r of this.state.resources.values()) sweepResource(this.state, r, nowMs)
    return restored.length
  }

  // ---- a client's messages (clients.ts) ----

  /** A client (re)connects under `key` (see clients.ts, `connect`). */
  connect(
    key: string,
    clientId: string,
    tenant: string | undefined,
    instance: string | undefined,
    nowMs: number,
  ): ConnectOutcome {
    return connect(this.state, key, clientId, tenant, instance, nowMs)
  }

  /**
   * Leases a call left for the next flush: those a takeover of the coordinator's own part grants
   * from what its dead predecessor held (`connect`, clients.ts `freeDeadCentral`).
   */
  takeBatches(): readonly LeaseBatch[] {
    return flush(this.state)
  }

  /** Holdings a client reports in its hello: claims, served newest first while learning. */
  learnHoldings(key: string, holdings: readonly Holding[], nowMs: number): readonly LeaseBatch[] {
    learnHoldings(this.state, key, holdings, nowMs)
    return flush(this.state)
  }

  /**
   * A demand report: records demand (subscribing to new resources) and a
   * quota's use, and renews the leases that are due. Returns the renewal
   * batch, the resources that deserve a prompt round (new subscriptions), and
   * those whose `used` passed what the client was ever leased.
   */
  reportDemand(
    key: string,
    reports: readonly DemandReport[],
    nowMs: number,
    /** The report's number (`demand.n`): quota leases' window edges are measured from it. */
    n?: number,
    /** The connection's round trip as last measured (ms): a quota's blocks last it longer. */
    rttMs?: number,
    /** When the client sent it, on its own clock (`demand.at`): edges from the soonest come. */
    sentAtMs?: number,
  ): {
    batches: readonly LeaseBatch[]
    newResources: readonly string[]
    overReported: readonly string[]
  } {
    const { newResources, overReported } = reportDemand(
      this.state,
      key,
      reports,
      nowMs,
      n,
      rttMs,
      sentAtMs,
    )
    return { batches: flush(this.state), newResources, overReported }
  }

  /** The client put the leases of batch `seq` in force (of `resources`, when given). */
  acknowledge(
    key: string,
    seq: number,
    resources: readonly string[] | undefined,
    nowMs: number,
    gave?: readonly (readonly [string, number])[],
    held?: readonly FallHeld[],
  ): readonly LeaseBatch[] {
    acknowledge(this.state, key, seq, resources, nowMs, gave, held)
    return flush(this.state)
  }

  /** Batches the pool returned that never left: their clients are renewed at their next report. */
  unsent(batches: readonly LeaseBatch[]): void {
    unsent(this.state, batches)
  }

  /**
   * The coordinator's own part of `key` reserves spending of keys of the keyed quota `familyId`
   * in `window`, written with the next changes (central-spend.ts). False when it holds no
   * share of the family.
   */
  reserveSpend(
    key: string,
    familyId: string,
    window: number,
    keys: Iterable<readonly [string, number]>,
  ): boolean {
    return reserveSpend(this.state, key, familyId, window, keys)
  }

  /**
   * The coordinator's own part of `key` admitted more keys of `familyId` in `window` than its
   * reservations may name: they say only that from now on (central-spend.ts).
   */
  reserveFull(key: string, familyId: string, window: number): boolean {
    return reserveFull(this.state, key, familyId, window)
  }

  /** The client gives resources up (a quota's stay spent until the window ends). */
  release(
    key: string,
    resourceIds: readonly string[],
    nowMs: number,
    spent?: readonly SpentReport[],
    held?: readonly HeldReport[],
  ): readonly LeaseBatch[] {
    release(this.state, key, resourceIds, nowMs, spent, held)
    return flush(this.state)
  }

  /** The connection is gone: leases stay committed until they lapse. Returns the client's resources. */
  disconnect(key: string, nowMs: number): string[] {
    return disconnect(this.state, key, nowMs)
  }

  /** What a downstream coordinator reports to its parent for a resource. */
  aggregate(resourceId: string): { wants: number; weight: number } | undefined {
    return aggregate(this.state, resourceId)
  }

  /**
   * Re-reads a resource's settings (config reload, a parent's new lease).
   * Leases follow at the next round. A resource no template matches any more
   * is drained: capacity 0, its leases shrinking through acks or lapses.
   * Returns false when the resource is drained that way.
   */
  refreshSettings(resourceId: string): boolean {
    const pool = this.state
    const r = pool.resources.get(resourceId)
    if (r === undefined) return true
    const next = pool.settingsFor(resourceId)
    const before = r.settings
    r.settings = next ?? copySettings(r.settings, { capacity: 0, burst: 0 })
    r.shape = shapeOf(r.settings)
    // The shares held were of the old capacity: none of the burst counts as free until every
    // lease of them may have ended.
    if (
      r.settings.capacity !== before.capacity ||
      r.settings.burst !== before.burst ||
      burstRefillMs(r.settings) !== burstRefillMs(before)
    )
      r.burstSlack = unsettledSlack(r)
    return next !== undefined
  }

  // ---- rounds and increases (rounds.ts, increases.ts) ----

  /**
   * Resources whose acks or releases left increases waiting that free
   * capacity could partly serve; the caller grants them shortly
   * (`grantWaiting`), once more acks have had time to come.
   */
  takeWaiting(): readonly string[] {
    const waiting = this.state.waiting
    if (waiting.size === 0) return noResources
    const ids = [...waiting]
    waiting.clear()
    return ids
  }

  /** Grants waiting increases of a resource from what is free, in part where need be. */
  grantWaiting(resourceId: string, nowMs: number): readonly LeaseBatch[] {
    const r = this.state.resources.get(resourceId)
    if (r === undefined) return noBatches
    grantIncreases(this.state, r, nowMs, true)
    return flush(this.state)
  }

  /**
   * A keyed family's resources: its own (`<prefix>/*`) and those of its hot
   * keys. They are run together (`roundMany`, `grantWaitingMany`; the
   * coordinator's rounds in up to eight slices, `roundSome`), so a client
   * gets one lease batch for all of them (or a slice of them), and sends one
   * ack, instead of one per key.
   */
  familyIds(familyId: string): string[] {
    const ids = [familyId]
    for (const r of this.state.familyKeys.get(familyId) ?? []) ids.push(r.settings.id)
    return ids
  }

  /** Rounds for several resources at once: one batch per client for all of them. */
  roundMany(resourceIds: readonly string[], nowMs: number): readonly LeaseBatch[] {
    for (const id of resourceIds) round(this.state, id, nowMs)
    return flush(this.state)
  }

  /**
   * Rounds for `resourceIds` from index `from` on, in order, while `more()` allows (at least
   * one runs): one batch per client for those run, and the index of the first not run. A
   * family's round in slices (coordinator/rounds.ts): its hot keys over several turns.
   */
  roundSome(
    resourceIds: readonly string[],
    from: number,
    nowMs: number,
    more: () => boolean,
  ): { readonly batches: readonly LeaseBatch[]; readonly next: number } {
    let i = from
    do round(this.state, resourceIds[i++]!, nowMs)
    while (i < resourceIds.length && more())
    return { batches: flush(this.state), next: i }
  }

  /** Grants what waits on several resources at once: one batch per client. */
  grantWaitingMany(resourceIds: readonly string[], nowMs: number): readonly LeaseBatch[] {
    for (const id of resourceIds) {
      const r = this.state.resources.get(id)
      if (r !== undefined) grantIncreases(this.state, r, nowMs, true)
    }
    return flush(this.state)
  }

  /**
   * The quota leases of `resourceIds` sent again unchanged before their window's end, each
   * placing that end anew from its client's soonest report (edge-renewal.ts): the batches.
   */
  renewEdges(resourceIds: readonly string[], nowMs: number): readonly LeaseBatch[] {
    for (const id of resourceIds) renewEdges(this.state, id, nowMs)
    return flush(this.state)
  }

  /** When the next quota window of `resourceId` opens (after the one in force at `nowMs`); undefined without one. */
  windowEndMs(resourceId: string, nowMs: number): number | undefined {
    const r = this.state.resources.get(resourceId)
    const w = r === undefined ? undefined : this.state.windowOf(r, nowMs)
    return w === undefined ? undefined : (w.nextMs ?? w.endMs)
  }

  /**
   * Resets a keyed quota's key (reset.ts): its whole budget again for the rest of the window,
   * once its holders have said what they spent. The batches seed the key where it was not
   * leased on its own.
   */
  resetKey(
    prefix: string,
    key: string,
    nowMs: number,
  ): { result: KeyResetOutcome; batches: readonly LeaseBatch[] } {
    const result = resetKey(this.state, prefix, key, nowMs)
    return { result, batches: flush(this.state) }
  }

  /** One round for a resource (rounds.ts): the batches to send. */
  round(resourceId: string, nowMs: number): readonly LeaseBatch[] {
    round(this.state, resourceId, nowMs)
    return flush(this.state)
  }

  /** Drops lapsed leases everywhere, and forgets what nothing holds any more. */
  sweep(nowMs: number): void {
    const pool = this.state
    for (const r of pool.resources.values()) sweepResource(pool, r, nowMs)
    for (const [id, q] of pool.quietAfter)
      if (nowMs >= q.heldUntilMs + q.refillMs) pool.quietAfter.delete(id)
  }
}
