import { EventEmitter } from 'node:events'
import {
  fallbackBurst,
  safeFallback,
  SluiceError,
  clampQuantity,
  type Clock,
  type FailureMode,
  type LeaseGrant,
  type LeaseProof,
  type ResourceKind,
  type Timer,
  type Usage,
  type DemandEntry,
} from '../shared/index.js'
import { DemandMeter } from './demand-meter.js'
import type { HelloHolding, Holder } from './holder.js'
import { RiseWait } from './rise.js'
import type { ResolvedResourceOptions } from './options.js'
import { createEnforcers, type Enforcer, type Enforcers, type Permit } from './enforcer.js'
import { WaitQueue } from '../shared/limiters/index.js'

export type { FailureMode } from '../shared/index.js'
export type { Permit } from './enforcer.js'

/**
 * The capacity rule in force: a lease; or, without one, the failure mode
 * (`learning` while a new coordinator re-learns); `lapsed` once safe mode's
 * hold has run out, or another process took the client id over: 0 until a
 * lease comes.
 */
export type ResourceMode = 'leased' | 'learning' | 'lapsed' | FailureMode

export interface ResourceOptions {
  /** Explicit demand (tokens/s or slots); unset: measured from use. */
  readonly wants?: number | undefined
  /** Share relative to peers; default 1. */
  readonly weight?: number | undefined
  /** Band; higher is served first; default 0. */
  readonly priority?: number | undefined
  /** Default `safe`. */
  readonly failureMode?: FailureMode | undefined
  /** Assumed until the first lease says otherwise; default `rate`. */
  readonly kind?: ResourceKind | undefined
  /** Capacity in `safe` mode before any lease has told the coordinator's; default 0. */
  readonly safeCapacity?: number | undefined
  /** Most callers waiting in `acquire` at once; default 10 000. */
  readonly maxWaiters?: number | undefined
  /**
   * For a holder that passes the capacity on (a downstream coordinator): how much of it is
   * committed onwards. A decrease is acknowledged only once this fits the new capacity;
   * call `client.drained()` when it may.
   */
  readonly committed?: (() => number) | undefined
}

export interface AcquireOptions {
  readonly signal?: AbortSignal | undefined
  /** Give up (rejecting with SLUICE_ERR_CLIENT_TIMEOUT) after this long; default: wait as long as it takes. */
  readonly maxWaitMs?: number | undefined
}

/** What the resource needs of the client that owns it. */
export interface ResourceOwner {
  /** A throttled resource asks for a demand report ahead of the period. */
  requestEarlyReport(): void
  /** A drained concurrency resource may let a held-back ack go. */
  drained(): void
  /** The user gave the resource up. */
  releaseResource(id: string): void
}

/** What rules the capacity: a lease, or (without one) learning or the failure mode. */
type LeaseState =
  | { readonly mode: 'leased'; readonly lease: LeaseGrant }
  | { readonly mode: Exclude<ResourceMode, 'leased'>; readonly lease: undefined }

/**
 * One resource as a client process sees it: the lease in force and the local
 * enforcement of it (a token bucket for rate, a semaphore for concurrency),
 * the failure mode when there is no lease, and the demand to report.
 *
 * Events: `lease` (LeaseGrant), `mode` (ResourceMode).
 */
/** The events of a resource: each lease received, and each change of mode. */
export interface ResourceEvents {
  lease: [lease: LeaseGrant]
  mode: [mode: ResourceMode]
}

export class Resource extends EventEmitter<ResourceEvents> implements Holder {
  readonly id: string
  readonly priority: number | undefined
  readonly failureMode: FailureMode
  #state: LeaseState
  #weight: number | undefined
  #wants: number | undefined
  readonly #clock: Clock
  readonly #owner: ResourceOwner
  readonly #meter: DemandMeter
  readonly #enforcers: Enforcers
  #enforcer: Enforcer
  readonly #committed: (() => number) | undefined
  readonly #waiters: WaitQueue<Permit>
  readonly #admit = (cost: number): boolean => this.#enforcer.take(cost)
  readonly #permit = (cost: number): Permit => this.#enforcer.permit(cost)
  #wakeTimer: Timer | undefined = undefined
  #expiryTimer: Timer | undefined = undefined
  /** A quota's next window sent ahead: when it opens, its lease (`#nextWindowAt`). */
  #nextTimer: Timer | undefined = undefined
  #holdTimer: Timer | undefined = undefined
  /** What safe mode enforces now: from the last lease while its hold lasts, then 0. */
  #fallbackCapacity: number
  #fallbackBurst: number
  /** The proof of the lease the capacity in force comes from (leased, or its fallback). */
  #proof: LeaseProof | undefined = undefined
  #lapsed = false
  /** Why the coordinator refuses this resource (until the next connection), if it does. */
  #refused: SluiceError | undefined
  readonly #readyWaiters: { resolve: () => void; reject: (e: SluiceError) => void }[] = []
  /**
   * A lease of 0 that says a share is rising to this process (client/rise.ts): `ready()` waits
   * for that share, or `risingWaitMs` after the 0.
   */
  readonly #rise: RiseWait
  #lastReported = 0
  #learning = false
  #closed = false

  /** `hotClock`: what `tryAcquire`'s bucket reads (the client's coarse clock); default `clock`. */
  constructor(
    id: string,
    options: ResolvedResourceOptions,
    clock: Clock,
    owner: ResourceOwner,
    hotClock: Clock = clock,
  ) {
    super()
    this.id = id
    this.#clock = clock
    this.#owner = owner
    this.#weight = options.weight
    this.priority = options.priority
    this.failureMode = options.failureMode
    this.#wants = options.wants
    this.#committed = options.committed
    const meter = new DemandMeter(clock.now())
    this.#meter = meter
    this.#waiters = new WaitQueue<Permit>(
      clock,
      options.maxWaiters,
      () => this.#serve(),
      (cost) => meter.refused(cost),
    )
    // Before any lease, safe mode runs at the option (default 0): the user's choice, not the
    // coordinator's, and so outside what it counts.
    this.#fallbackCapacity = options.safeCapacity
    this.#fallbackBurst = this.#fallbackCapacity
    this.#enforcers = createEnforcers(hotClock, meter, {
      refused: () => owner.requestEarlyReport(),
      lowOnBudget: () => owner.requestEarlyReport(),
      slotsReleased: (cost) => this.releaseSlots(cost),
    })
    this.#enforcer = this.#enforcers[options.kind]
    this.#state = { mode: this.failureMode, lease: undefined }
    this.#rise = new RiseWait(clock, () => this.#resolveReady())
    this.#applyCapacity()
  }

  /** `rate` or `concurrency`: as the options assume until the first lease says. */
  get kind(): ResourceKind {
    return this.#enforcer.kind
  }

  /** The lease in force, as received; undefined before the first or after it lapses. */
  get lease(): LeaseGrant | undefined {
    return this.#state.lease
  }

  /** The capacity rule in force. */
  get mode(): ResourceMode {
    return this.#state.mode
  }

  /** The weight reported to the coordinator; undefined: the default of 1. */
  get weight(): number | undefined {
    return this.#weight
  }

  /** The resource's whole capacity and burst, as the last lease that stated them said. */
  #limit: { readonly capacity: number; readonly burst: number } | undefined

  /** Capacity in force: tokens/s (rate) or slots (concurrency). */
  get capacity(): number {
    const state = this.#state
    if (state.mode === 'leased') return state.lease.capacity
    if (this.#lapsed) return 0
    switch (this.failureMode) {
      case 'pessimistic':
        return 0
      case 'optimistic':
        return this.#wants ?? this.#lastReported
      case 'safe':
        return this.#fallbackCapacity
    }
  }

  /**
   * What this process may enforce now, as a hello reports it: its lease, or
   * its safe fallback while the hold lasts (optimistic: its demand), and for
   * concurrency the slots in flight. Undefined when nothing.
   */
  holding():
    { resource: string; capacity: number; inFlight?: number; proof?: LeaseProof } | undefined {
    const capacity = this.capacity
    const inFlight = this.#enforcer.inFlight
    if (!(capacity > 0) && inFlight === 0) return undefined
    return {
      resource: this.id,
      capacity: clampQuantity(capacity),
      ...(inFlight > 0 ? { inFlight } : {}),
      ...(this.#proof === undefined ? {} : { proof: this.#proof }),
    }
  }

  /** Why the coordinator refuses this resource, while it does. */
  get refused(): SluiceError | undefined {
    return this.#refused
  }

  // ---- as a Holder (holder.ts): what the client asks of it ----

  get holderId(): string {
    return this.id
  }

  holds(resourceId: string): boolean {
    return resourceId === this.id
  }

  helloHoldings(): HelloHolding[] {
    const h = this.holding()
    return h === undefined ? [] : [h]
  }

  /** This period's demand (measured, or `wants`), a quota's use, and the usage, as one report entry. */
  reportEntries(): DemandEntry[] {
    const quota = this.usedInWindow()
    return [
      {
        resource: this.id,
        wants: clampQuantity(this.takeDemand()),
        ...(quota === undefined ? {} : { used: quota.used, window: quota.window }),
        ...(this.weight === undefined ? {} : { weight: this.weight }),
        ...(this.priority === undefined ? {} : { priority: this.priority }),
        usage: this.takeUsage(),
      },
    ]
  }

  applyLeaseOf(_resourceId: string, grant: LeaseGrant): boolean {
    const inForce = this.applyLease(grant)
    this.setLearning(false)
    return inForce
  }

  fitsFor(): boolean {
    return this.drainedToLimit
  }

  leasedIds(): string[] {
    return [this.id]
  }

  /** A new connection: learning or not, and a resource refused before is asked for again. */
  connected(learning: boolean): void {
    this.setLearning(learning)
    this.retryRefused()
  }

  /**
   * Resolves at the first lease (at once if one is in force; not at a lease of 0 that says a
   * share is rising to this process: at that share, or `risingWaitMs` after the 0, client/rise.ts); rejects with
   * the coded error when the coordinator refuses the resource or the client
   * stops, with SLUICE_ERR_CLIENT_TIMEOUT after `timeoutMs`, or with
   * SLUICE_ERR_CLIENT_ABORTED on `signal`. The way to wait before serving:
   * `await resource.ready()`.
   */
  ready(
    options: { timeoutMs?: number | undefined; signal?: AbortSignal | undefined } = {},
  ): Promise<void> {
    if (this.mode === 'leased' && !this.#rise.pending) return Promise.resolve()
    if (this.#refused !== undefined) return Promise.reject(this.#refused)
    if (this.#closed) return Promise.reject(new SluiceError('SLUICE_ERR_CLIENT_CLOSED', this.id))
    return new Promise<void>((resolve, reject) => {
      let timer: Timer | undefined
      const done = (): void => {
        timer?.cancel()
        options.signal?.removeEventListener('abort', onAbort)
        const i = this.#readyWaiters.indexOf(waiter)
        if (i >= 0) this.#readyWaiters.splice(i, 1)
      }
      const waiter = {
        resolve: () => {
          done()
          resolve()
        },
        reject: (e: SluiceError) => {
          done()
          reject(e)
        },
      }
      const onAbort = (): void =>
        waiter.reject(new SluiceError('SLUICE_ERR_CLIENT_ABORTED', this.id))
      if (options.signal?.aborted === true) return onAbort()
      options.signal?.addEventListener('abort', onAbort, { once: true })
      if (options.timeoutMs !== undefined)
        timer = this.#clock.setTimeout(
          () =>
            waiter.reject(
              new SluiceError(
                'SLUICE_ERR_CLIENT_TIMEOUT',
                `${this.id}: no lease within ${options.timeoutMs} ms (is the coordinator reachable?)`,
              ),
            ),
          options.timeoutMs,
        )
      this.#readyWaiters.push(waiter)
    })
  }

  /** The coordinator refuses this resource (or the client stopped): ready() rejects with it. */
  refuse(error: SluiceError): void {
    this.#refused = error
    for (const w of [...this.#readyWaiters]) w.reject(error)
  }

  /** A new connection: a refused resource is asked for once more. */
  retryRefused(): void {
    if (this.#refused?.code === 'SLUICE_ERR_AUTH_INVALID_TOKEN') return
    if (this.#refused !== undefined && this.#refused.resource !== undefined)
      this.#refused = undefined
  }

  /** Slots in use (concurrency). */
  get inFlight(): number {
    return this.#enforcer.inFlight
  }

  /** Callers waiting in `acquire`. */
  get waiting(): number {
    return this.#waiters.length
  }

  /**
   * Takes `cost` at once if the lease allows: the policing check. No
   * allocation, no promise, no timer. For a concurrency resource a `true`
   * must be paired with `releaseSlots(cost)`.
   */
  tryAcquire(cost = 1): boolean {
    return this.#enforcer.tryAcquire(cost, this.#waiters.length)
  }

  /**
   * Waits in FIFO order until `cost` is admitted: the shaping path. Rejects
   * with SLUICE_ERR_CLIENT_ABORTED, SLUICE_ERR_CLIENT_TIMEOUT,
   * SLUICE_ERR_CLIENT_QUEUE_FULL or SLUICE_ERR_CLIENT_CLOSED.
   */
  acquire(cost = 1, options: AcquireOptions = {}): Promise<Permit> {
    if (this.#closed) return Promise.reject(new SluiceError('SLUICE_ERR_CLIENT_CLOSED', this.id))
    const enforcer = this.#enforcer
    enforcer.meterArrival(cost)
    if (this.#waiters.length === 0 && enforcer.take(cost))
      return Promise.resolve(enforcer.permit(cost))
    enforcer.meterQueued(cost, this.#waiters.length)
    const waiting = this.#waiters.enqueue(cost, options, this.id)
    this.#owner.requestEarlyReport()
    this.#serve()
    return waiting
  }

  /** Milliseconds until `cost` would be admitted: 0 now, Infinity while nothing refills (or slots are all taken). */
  msUntil(cost = 1): number {
    return this.#enforcer.msUntil(cost)
  }

  /** Whole tokens (rate) or slots (concurrency) available now. */
  remaining(): number {
    return this.#enforcer.remaining()
  }

  /**
   * The limit a caller is held to, for HTTP headers: the resource's whole capacity per second
   * and burst, every process's together, as the coordinator states it (before the first lease,
   * or from an older coordinator: what this process enforces); for a quota, the whole quota of
   * a window and the window's length.
   */
  describe(): { ratePerSec: number; burst: number; windowSec?: number } {
    const state = this.#state
    const lease = state.mode === 'leased' ? state.lease : undefined
    const window = lease?.window
    if (window !== undefined) {
      const windowSec = Math.max(1, Math.round(window.lengthMs / 1000))
      return { ratePerSec: window.quota / windowSec, burst: window.quota, windowSec }
    }
    // The limit outlives the lease that stated it: a lapse changes what this process may admit,
    // not the limit callers are held to.
    const limit = this.#limit
    if (limit !== undefined) return { ratePerSec: limit.capacity, burst: limit.burst }
    const capacity = this.capacity
    return { ratePerSec: capacity, burst: state.mode === 'leased' ? state.lease.burst : capacity }
  }

  /** Milliseconds until the bucket is full again (rate); 0 for concurrency. */
  msUntilReset(): number {
    return this.#enforcer.msUntilFull()
  }

  /** Gives back concurrency slots taken by `tryAcquire`. */
  releaseSlots(cost = 1): void {
    this.#enforcers.concurrency.release(cost)
    this.#serve()
    if (this.#enforcer.fits) this.#owner.drained()
  }

  /** Sets the weight reported from the next report on. */
  setWeight(weight: number | undefined): void {
    this.#weight = weight
  }

  /** Sets explicit demand; `undefined` returns to measured demand. */
  setWants(wants: number | undefined): void {
    this.#wants = wants
    if (this.mode === 'optimistic') this.#applyCapacity()
  }

  /** Gives the resource up: the coordinator stops counting its lease. */
  release(): void {
    this.#owner.releaseResource(this.id)
  }

  // ---- driven by the client ----

  /** Demand to report now (explicit, or measured over the window just ended). */
  takeDemand(): number {
    const measured = this.#enforcer.takeDemand(this.#clock.now(), this.#waiters.totalCost())
    this.#lastReported = this.#wants ?? measured
    if (this.mode === 'optimistic') this.#applyCapacity()
    return this.#lastReported
  }

  /** Quota: units used in the current window, for the report. */
  usedInWindow(): { readonly used: number; readonly window: number } | undefined {
    return this.#enforcer.usedInWindow()
  }

  /** Quota: what a clean close says it used (QuotaEnforcer.usedAtClose). */
  usedAtClose(): { readonly used: number; readonly window: number } | undefined {
    const quota = this.#enforcers.quota
    return this.#enforcer === quota ? quota.usedAtClose() : this.#enforcer.usedInWindow()
  }

  /**
   * Quota: what an earlier handle of this id used in `window` before it was released. A lease
   * of the released one may still be on its way and would be put in force here: counted from
   * what was used, it lets no more be spent than it allowed (the coordinator counts it apart).
   */
  carryUsed(used: number, window: number): void {
    this.#enforcers.quota.carry(used, window)
  }

  /** What the limiter admitted and refused since the last call, for the report. */
  takeUsage(): Usage {
    return this.#meter.takeUsage(
      this.#clock.now(),
      this.#waiters.length,
      this.#enforcer.reportedInFlight,
    )
  }

  /** Whether demand so far in this window is well above the capacity in force. */
  throttled(periodMs: number): boolean {
    return this.#enforcer.throttled(
      this.#clock.now(),
      this.capacity,
      this.#waiters.length,
      periodMs,
    )
  }

  /** Applies a lease from the coordinator. Returns false when the ack must wait for in-flight work to drain. */
  applyLease(grant: LeaseGrant): boolean {
    if (this.#closed) return true
    // What a fall gives up is said in this lease's ack only (handed on later, it would come
    // after the capacity sat free: past the bound, as BurstSlack's property shows).
    this.#gave = 0
    this.#enforcer = this.#enforcers[grant.kind]
    const window = grant.window
    // A late lease of a window over here, the next one it carried already open: the enforcer
    // keeps the next window's budget, and this resource its lease of it (`lease`, the events, a
    // pending switch to it), as if the late one had not come. Acknowledged, nothing to drain.
    if (window !== undefined && !this.#enforcer.window(window.index, window.endsInMs, window.next))
      return true
    this.#nextTimer?.cancel()
    this.#nextTimer = undefined
    // A named quota's next window sent ahead: its budget is in force from its start (the enforcer
    // puts it there at the first check after); then it is this resource's lease, as if it came.
    if (window?.next !== undefined && window.next.index > window.index)
      this.#nextTimer = this.#nextWindowAt(grant, window.next)
    this.#expiryTimer?.cancel()
    this.#holdTimer?.cancel()
    this.#holdTimer = undefined
    this.#lapsed = false
    this.#proof = grant.proof
    if (grant.limit !== undefined) this.#limit = grant.limit
    // A lease running out is no reason to keep the process alive.
    this.#expiryTimer = this.#clock.setTimeout(() => this.#lapse(grant), grant.ttlMs).unref()
    this.#setState({ mode: 'leased', lease: grant })
    this.#refused = undefined
    // Nobody held the resource for its burst's refill time: this bucket may start full. A rise
    // may hold tokens another holder gave up as it fell (`fill`: an ack's `gave`, handed on).
    this.#applyCapacity(grant.full === true, grant.fill ?? 0)
    this.emit('lease', grant)
    if (!this.#rise.note(grant)) this.#resolveReady()
    return this.drainedToLimit
  }

  #resolveReady(): void {
    for (const w of [...this.#readyWaiters]) w.resolve()
  }

  /** Whether in-flight work is within the current limit (a decrease may be acknowledged). */
  get drainedToLimit(): boolean {
    if (this.#committed !== undefined && this.#committed() > this.capacity * (1 + 1e-9) + 1e-9)
      return false
    return this.#enforcer.fits
  }

  /** The coordinator says it is re-learning: no lease yet, failure mode rules, labelled `learning`. */
  setLearning(learning: boolean): void {
    this.#learning = learning
    if (this.mode !== 'leased') this.#setState(this.#unleased())
  }

  /**
   * Stops enforcing anything at once: another process took this client's id
   * over, and what this one was leased may be counted as that one's now.
   * Capacity 0 (`lapsed`) until a new lease comes.
   */
  revoke(): void {
    this.#rise.cancel()
    this.#expiryTimer?.cancel()
    this.#expiryTimer = undefined
    this.#nextTimer?.cancel()
    this.#nextTimer = undefined
    this.#enforcers.quota.forgetNext()
    this.#holdTimer?.cancel()
    this.#holdTimer = undefined
    this.#fallbackCapacity = 0
    this.#fallbackBurst = 0
    this.#proof = undefined
    this.#lapsed = true
    this.#setState(this.#unleased())
    this.#applyCapacity()
  }

  close(): void {
    this.#closed = true
    this.#rise.cancel()
    this.#expiryTimer?.cancel()
    this.#nextTimer?.cancel()
    this.#holdTimer?.cancel()
    this.#wakeTimer?.cancel()
    this.#waiters.rejectAll('SLUICE_ERR_CLIENT_CLOSED', this.id)
    for (const w of [...this.#readyWaiters])
      w.reject(new SluiceError('SLUICE_ERR_CLIENT_CLOSED', this.id))
  }

  // ---- internals ----

  #unleased(): LeaseState {
    if (this.#learning) return { mode: 'learning', lease: undefined }
    if (this.#lapsed) return { mode: 'lapsed', lease: undefined }
    return { mode: this.failureMode, lease: undefined }
  }

  /** At `next`'s start: the lease of that window, as `grant` sent it ahead, applied. */
  #nextWindowAt(grant: LeaseGrant, next: NonNullable<LeaseGrant['window']>['next'] & {}): Timer {
    const receivedMs = this.#clock.now()
    return this.#clock
      .setTimeout(() => {
        this.#nextTimer = undefined
        const endsInMs = Math.max(0, Math.floor(next.endsInMs - (this.#clock.now() - receivedMs)))
        const { quota, lengthMs } = grant.window!
        this.applyLease({
          ...grant,
          capacity: next.capacity,
          // No fallback: the coordinator counts none for it (Entry.promoteAhead).
          safeCapacity: 0,
          ttlMs: endsInMs,
          window: { index: next.index, endsInMs, quota, lengthMs },
        })
      }, next.startsInMs)
      .unref()
  }

  /**
   * The lease ran out unrenewed. Safe mode falls back to the lease's safe
   * capacity, never above the lease itself, with the same share of burst, for
   * the lease's safe hold; then to 0. The coordinator counts exactly this as
   * committed, so a partition of any shape stays within capacity.
   */
  #lapse(lease: LeaseGrant): void {
    this.#expiryTimer = undefined
    const fallback = safeFallback(lease)
    this.#fallbackCapacity = fallback
    this.#fallbackBurst = fallbackBurst(lease, fallback)
    this.#holdTimer?.cancel()
    this.#holdTimer = this.#clock
      .setTimeout(() => {
        this.#holdTimer = undefined
        this.#fallbackCapacity = 0
        this.#fallbackBurst = 0
        this.#proof = undefined
        this.#lapsed = this.failureMode === 'safe'
        this.#setState(this.#unleased())
        this.#applyCapacity()
      }, lease.safeHoldMs)
      .unref()
    this.#setState(this.#unleased())
    this.#applyCapacity()
  }

  #setState(state: LeaseState): void {
    const changed = state.mode !== this.#state.mode
    this.#state = state
    if (changed) this.emit('mode', state.mode)
  }

  /** Whether the capacity applied last was a lease's. */
  #leasedBefore = false

  /** Tokens the fall of the lease just put in force gave up (`takeGave`). */
  #gave = 0

  /** What the fall of the lease just put in force gave up, for its ack (the coordinator may hand it on). */
  takeGave(): number {
    const gave = this.#gave
    this.#gave = 0
    return gave
  }

  #applyCapacity(fill = false, handed = 0): void {
    const capacity = this.capacity
    const state = this.#state
    const burst =
      state.mode === 'leased'
        ? state.lease.burst
        : this.failureMode === 'safe'
          ? Math.min(this.#fallbackBurst, capacity)
          : capacity
    // A share moving between leases gives up what its fall held, or holds what was handed to its
    // rise (enforcer.ts); from or to anything else, none is kept.
    const leased = state.mode === 'leased'
    const gave = this.#enforcer.apply(capacity, burst, leased && this.#leasedBefore, handed)
    // A holder that passes the capacity on (a downstream coordinator) spends nothing from this
    // bucket: its clients hold the tokens, so it has none to give up (handed on, they would
    // count twice: the children's buckets keep theirs).
    if (this.#committed === undefined) this.#gave += gave
    this.#leasedBefore = leased
    if (fill) this.#enforcer.fill()
    this.#serve()
  }

  /** Admits waiters in order while capacity allows; arms one wake timer for the head otherwise. */
  #serve(): void {
    this.#waiters.serve(this.#admit, this.#permit)
    this.#wakeTimer?.cancel()
    this.#wakeTimer = undefined
    const cost = this.#waiters.headCost()
    if (cost !== undefined && this.#enforcer.refills) {
      const waitMs = this.#enforcer.msUntil(cost)
      // At rate 0 nothing refills: a new lease or mode change calls #serve again.
      if (Number.isFinite(waitMs))
        this.#wakeTimer = this.#clock.setTimeout(() => this.#serve(), Math.ceil(waitMs))
    }
  }
}
