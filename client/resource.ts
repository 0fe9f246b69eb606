import { EventEmitter } from 'node:events'
import {
  SluiceError,
  type Clock,
  type FailureMode,
  type LeaseGrant,
  type ResourceKind,
  type Timer,
} from '../shared/index.js'
import { DemandMeter } from './demand-meter.js'
import {
  RateEnforcer,
  SlotEnforcer,
  type Enforcer,
  type EnforcerHost,
  type Permit,
} from './enforcer.js'
import { WaitQueue } from './wait-queue.js'

export type { FailureMode } from '../shared/index.js'
export type { Permit } from './enforcer.js'

/** The capacity rule in force. */
export type ResourceMode = 'leased' | 'learning' | FailureMode

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
export class Resource extends EventEmitter {
  readonly id: string
  readonly priority: number | undefined
  readonly failureMode: FailureMode
  #state: LeaseState
  #weight: number | undefined
  #wants: number | undefined
  readonly #clock: Clock
  readonly #owner: ResourceOwner
  readonly #rate: RateEnforcer
  readonly #slots: SlotEnforcer
  #enforcer: Enforcer
  readonly #committed: (() => number) | undefined
  readonly #waiters: WaitQueue<Permit>
  readonly #admit = (cost: number): boolean => this.#enforcer.take(cost)
  readonly #permit = (cost: number): Permit => this.#enforcer.permit(cost)
  #wakeTimer: Timer | undefined = undefined
  #expiryTimer: Timer | undefined = undefined
  #lastSafeCapacity: number
  #lastReported = 0
  #learning = false
  #closed = false

  constructor(id: string, options: ResourceOptions, clock: Clock, owner: ResourceOwner) {
    super()
    this.id = id
    this.#clock = clock
    this.#owner = owner
    this.#weight = options.weight
    this.priority = options.priority
    this.failureMode = options.failureMode ?? 'safe'
    this.#wants = options.wants
    this.#committed = options.committed
    this.#waiters = new WaitQueue<Permit>(clock, options.maxWaiters ?? 10_000, () => this.#serve())
    this.#lastSafeCapacity = options.safeCapacity ?? 0
    const meter = new DemandMeter(clock.now())
    const host: EnforcerHost = {
      refused: () => owner.requestEarlyReport(),
      slotsReleased: (cost) => this.releaseSlots(cost),
    }
    this.#rate = new RateEnforcer(clock, meter, host)
    this.#slots = new SlotEnforcer(meter, host)
    this.#enforcer = options.kind === 'concurrency' ? this.#slots : this.#rate
    this.#state = { mode: this.failureMode, lease: undefined }
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

  /** Capacity in force: tokens/s (rate) or slots (concurrency). */
  get capacity(): number {
    const state = this.#state
    if (state.mode === 'leased') return state.lease.capacity
    const rule = state.mode === 'learning' || state.mode === 'safe' ? this.failureMode : state.mode
    switch (rule) {
      case 'pessimistic':
        return 0
      case 'optimistic':
        return this.#wants ?? this.#lastReported
      case 'safe':
        return this.#lastSafeCapacity
    }
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
    if (this.kind === 'rate') enforcer.meterWaiter(cost, 0)
    if (this.#waiters.length === 0 && enforcer.take(cost))
      return Promise.resolve(enforcer.permit(cost))
    if (this.kind === 'concurrency') enforcer.meterWaiter(cost, this.#waiters.length)
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

  /** Gives back concurrency slots taken by `tryAcquire`. */
  releaseSlots(cost = 1): void {
    this.#slots.release(cost)
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

  /** Whether demand so far in this window is well above the capacity in force. */
  throttled(): boolean {
    return this.#enforcer.throttled(this.#clock.now(), this.capacity, this.#waiters.length)
  }

  /** Applies a lease from the coordinator. Returns false when the ack must wait for in-flight work to drain. */
  applyLease(grant: LeaseGrant): boolean {
    if (this.#closed) return true
    this.#enforcer = grant.kind === 'concurrency' ? this.#slots : this.#rate
    this.#lastSafeCapacity = grant.safeCapacity
    this.#expiryTimer?.cancel()
    // A lease running out is no reason to keep the process alive.
    this.#expiryTimer = this.#clock.setTimeout(() => this.#lapse(), grant.ttlMs).unref()
    this.#setState({ mode: 'leased', lease: grant })
    this.#applyCapacity()
    this.emit('lease', grant)
    return this.drainedToLimit
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

  close(): void {
    this.#closed = true
    this.#expiryTimer?.cancel()
    this.#wakeTimer?.cancel()
    this.#waiters.rejectAll('SLUICE_ERR_CLIENT_CLOSED', this.id)
  }

  // ---- internals ----

  #unleased(): LeaseState {
    return { mode: this.#learning ? 'learning' : this.failureMode, lease: undefined }
  }

  #lapse(): void {
    this.#expiryTimer = undefined
    this.#setState(this.#unleased())
    this.#applyCapacity()
  }

  #setState(state: LeaseState): void {
    const changed = state.mode !== this.#state.mode
    this.#state = state
    if (changed) this.emit('mode', state.mode)
  }

  #applyCapacity(): void {
    const capacity = this.capacity
    const state = this.#state
    this.#enforcer.apply(capacity, state.mode === 'leased' ? state.lease.burst : capacity)
    this.#serve()
  }

  /** Admits waiters in order while capacity allows; arms one wake timer for the head otherwise. */
  #serve(): void {
    this.#waiters.serve(this.#admit, this.#permit)
    this.#wakeTimer?.cancel()
    this.#wakeTimer = undefined
    const cost = this.#waiters.headCost()
    if (cost !== undefined && this.kind === 'rate') {
      const waitMs = this.#enforcer.msUntil(cost)
      // At rate 0 nothing refills: a new lease or mode change calls #serve again.
      if (Number.isFinite(waitMs))
        this.#wakeTimer = this.#clock.setTimeout(() => this.#serve(), Math.ceil(waitMs))
    }
  }
}
