import { EventEmitter } from 'node:events'
import { SluiceError, type Clock, type LeaseGrant, type Timer } from '../shared/index.js'
import { DemandMeter } from './demand-meter.js'
import { WaitQueue } from './wait-queue.js'
import { TokenBucket } from './limiters/token-bucket.js'

/** What a resource does before its first lease and after its lease lapses unrenewed. */
export type FailureMode = 'safe' | 'pessimistic' | 'optimistic'
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
  readonly kind?: 'rate' | 'concurrency' | undefined
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

/** Held capacity from `acquire`; `release()` gives concurrency slots back (a no-op for rate resources). */
export interface Permit {
  release(): void
}

const ratePermit: Permit = Object.freeze({ release: () => undefined })

class SlotPermit implements Permit {
  #resource: Resource | undefined
  readonly #cost: number
  constructor(resource: Resource, cost: number) {
    this.#resource = resource
    this.#cost = cost
  }
  release(): void {
    const r = this.#resource
    if (r === undefined) return
    this.#resource = undefined
    r.releaseSlots(this.#cost)
  }
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

/**
 * One resource as a client process sees it: the lease in force and the local
 * enforcement of it (a token bucket for rate, a semaphore for concurrency),
 * the failure mode when there is no lease, and the demand to report.
 *
 * Events: `lease` (LeaseGrant), `mode` (ResourceMode).
 */
export class Resource extends EventEmitter {
  readonly id: string
  kind: 'rate' | 'concurrency'
  /** The lease in force, as received; undefined before the first or after it lapses. */
  lease: LeaseGrant | undefined = undefined
  mode: ResourceMode
  weight: number | undefined
  readonly priority: number | undefined
  readonly failureMode: FailureMode
  #wants: number | undefined
  readonly #clock: Clock
  readonly #owner: ResourceOwner
  readonly #bucket: TokenBucket
  readonly #meter: DemandMeter
  readonly #committed: (() => number) | undefined
  readonly #waiters: WaitQueue<Permit>
  readonly #admit = (cost: number): boolean =>
    this.kind === 'rate' ? this.#bucket.tryTake(cost) : this.#takeSlots(cost)
  readonly #permit = (cost: number): Permit =>
    this.kind === 'rate' ? ratePermit : new SlotPermit(this, cost)
  #inFlight = 0
  #slotLimit = 0
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
    this.kind = options.kind ?? 'rate'
    this.weight = options.weight
    this.priority = options.priority
    this.failureMode = options.failureMode ?? 'safe'
    this.#wants = options.wants
    this.#committed = options.committed
    this.#waiters = new WaitQueue<Permit>(clock, options.maxWaiters ?? 10_000, () => this.#serve())
    this.#lastSafeCapacity = options.safeCapacity ?? 0
    this.#meter = new DemandMeter(clock.now())
    this.#bucket = new TokenBucket(clock, 0, 0, 0)
    this.mode = this.failureMode
    this.#applyCapacity()
  }

  /** Capacity in force: tokens/s (rate) or slots (concurrency). */
  get capacity(): number {
    switch (this.mode) {
      case 'leased':
        return this.lease!.capacity
      case 'pessimistic':
        return 0
      case 'optimistic':
        return this.#wants ?? this.#lastReported
      case 'safe':
      case 'learning':
        return this.failureMode === 'pessimistic'
          ? 0
          : this.failureMode === 'optimistic'
            ? (this.#wants ?? this.#lastReported)
            : this.#lastSafeCapacity
    }
  }

  /** Slots in use (concurrency). */
  get inFlight(): number {
    return this.#inFlight
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
    if (this.kind === 'rate') {
      this.#meter.ask(cost)
      if (this.#waiters.length === 0 && this.#bucket.tryTake(cost)) return true
      this.#owner.requestEarlyReport()
      return false
    }
    if (this.#waiters.length === 0 && this.#inFlight + cost <= this.#slotLimit) {
      this.#inFlight += cost
      this.#meter.observe(this.#inFlight)
      return true
    }
    this.#meter.observe(this.#inFlight + cost)
    return false
  }

  /**
   * Waits in FIFO order until `cost` is admitted: the shaping path. Rejects
   * with SLUICE_ERR_CLIENT_ABORTED, SLUICE_ERR_CLIENT_TIMEOUT,
   * SLUICE_ERR_CLIENT_QUEUE_FULL or SLUICE_ERR_CLIENT_CLOSED.
   */
  acquire(cost = 1, options: AcquireOptions = {}): Promise<Permit> {
    if (this.#closed) return Promise.reject(new SluiceError('SLUICE_ERR_CLIENT_CLOSED', this.id))
    if (this.kind === 'rate') this.#meter.ask(cost)
    if (this.#waiters.length === 0) {
      if (this.kind === 'rate' ? this.#bucket.tryTake(cost) : this.#takeSlots(cost)) {
        return Promise.resolve(this.kind === 'rate' ? ratePermit : new SlotPermit(this, cost))
      }
    }
    if (this.kind === 'concurrency')
      this.#meter.observe(this.#inFlight + cost + this.#waiters.length)
    const waiting = this.#waiters.enqueue(cost, options, this.id)
    this.#owner.requestEarlyReport()
    this.#serve()
    return waiting
  }

  /** Milliseconds until `cost` would be admitted: 0 now, Infinity while nothing refills (or slots are all taken). */
  msUntil(cost = 1): number {
    if (this.kind === 'rate') return this.#bucket.msUntil(cost)
    return this.#inFlight + cost <= this.#slotLimit ? 0 : Infinity
  }

  /** Whole tokens (rate) or slots (concurrency) available now. */
  remaining(): number {
    return this.kind === 'rate'
      ? Math.floor(this.#bucket.tokens)
      : Math.max(0, this.#slotLimit - this.#inFlight)
  }

  /** Gives back concurrency slots taken by `tryAcquire`. */
  releaseSlots(cost = 1): void {
    this.#inFlight = Math.max(0, this.#inFlight - cost)
    this.#serve()
    if (this.#inFlight <= this.#slotLimit) this.#owner.drained()
  }

  /** Sets the weight reported from the next report on. */
  setWeight(weight: number | undefined): void {
    this.weight = weight
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
    const measured = this.#meter.take(
      this.#clock.now(),
      this.kind,
      this.#inFlight + this.#waiters.totalCost(),
    )
    this.#lastReported = this.#wants ?? measured
    if (this.mode === 'optimistic') this.#applyCapacity()
    return this.#lastReported
  }

  /** Whether demand so far in this window is well above the capacity in force. */
  throttled(): boolean {
    if (this.kind !== 'rate') return this.#waiters.length > 0
    const asked = this.#meter.rateSoFar(this.#clock.now())
    return asked > 1.5 * this.capacity + 1
  }

  /** Applies a lease from the coordinator. Returns false when the ack must wait for in-flight work to drain. */
  applyLease(grant: LeaseGrant): boolean {
    if (this.#closed) return true
    this.kind = grant.kind
    this.lease = grant
    this.#lastSafeCapacity = grant.safeCapacity
    this.#expiryTimer?.cancel()
    // A lease running out is no reason to keep the process alive.
    this.#expiryTimer = this.#clock.setTimeout(() => this.#lapse(), grant.ttlMs).unref()
    this.#setMode('leased')
    this.#applyCapacity()
    this.emit('lease', grant)
    return this.drainedToLimit
  }

  /** Whether in-flight work is within the current limit (a decrease may be acknowledged). */
  get drainedToLimit(): boolean {
    if (this.#committed !== undefined && this.#committed() > this.capacity * (1 + 1e-9) + 1e-9)
      return false
    return this.kind === 'rate' || this.#inFlight <= this.#slotLimit
  }

  /** The coordinator says it is re-learning: no lease yet, failure mode rules, labelled `learning`. */
  setLearning(learning: boolean): void {
    this.#learning = learning
    if (this.mode !== 'leased') this.#setMode(learning ? 'learning' : this.failureMode)
  }

  close(): void {
    this.#closed = true
    this.#expiryTimer?.cancel()
    this.#wakeTimer?.cancel()
    this.#waiters.rejectAll('SLUICE_ERR_CLIENT_CLOSED', this.id)
  }

  // ---- internals ----

  #lapse(): void {
    this.#expiryTimer = undefined
    this.lease = undefined
    this.#setMode(this.#learning ? 'learning' : this.failureMode)
    this.#applyCapacity()
  }

  #setMode(mode: ResourceMode): void {
    if (mode === this.mode) return
    this.mode = mode
    this.emit('mode', mode)
  }

  #applyCapacity(): void {
    const capacity = this.capacity
    if (this.kind === 'rate') {
      const burst = this.mode === 'leased' ? this.lease!.burst : capacity
      this.#bucket.setRate(capacity, burst)
    } else {
      this.#slotLimit = Math.floor(capacity + 1e-9)
    }
    this.#serve()
  }

  #takeSlots(cost: number): boolean {
    if (this.#inFlight + cost > this.#slotLimit) return false
    this.#inFlight += cost
    this.#meter.observe(this.#inFlight)
    return true
  }

  /** Admits waiters in order while capacity allows; arms one wake timer for the head otherwise. */
  #serve(): void {
    this.#waiters.serve(this.#admit, this.#permit)
    this.#wakeTimer?.cancel()
    this.#wakeTimer = undefined
    const cost = this.#waiters.headCost()
    if (cost !== undefined && this.kind === 'rate') {
      const waitMs = this.#bucket.msUntil(cost)
      // At rate 0 nothing refills: a new lease or mode change calls #serve again.
      if (Number.isFinite(waitMs))
        this.#wakeTimer = this.#clock.setTimeout(() => this.#serve(), Math.ceil(waitMs))
    }
  }
}
