import { EventEmitter } from 'node:events'
import {
  SluiceError,
  fallbackBurst,
  familyIdOf,
  keyIdOf,
  keyLimits,
  quotaHorizonMs,
  safeFallback,
  shareOfKey,
  keyProblem,
  kindTraits,
  type KindTraits,
  type Clock,
  type LeaseGrant,
  type LeaseProof,
  type ResourceKind,
  type Timer,
} from '../shared/index.js'
import { TokenBucket, WaitQueue } from '../shared/limiters/index.js'
import type { Permit } from './enforcer.js'

/** `client.keyed(prefix, options)`. */
export interface KeyedOptions {
  /** Keys tracked in this process at once (least recently used go first); default 50 000. */
  readonly maxKeys?: number | undefined
  /** Keys reported in one demand report as wanting more than the default share; default 64. */
  readonly maxKeysPerReport?: number | undefined
  /** Share relative to the family's other holders; default 1. */
  readonly weight?: number | undefined
}

/** What one key may use in this process now, and where that comes from. */
export interface KeyLease {
  /** Tokens/s (rate), slots (concurrency), or units of the window's budget (quota). */
  readonly capacity: number
  /** Tokens the key's bucket holds at most (rate); slots for concurrency; the budget for a quota. */
  readonly burst: number
  /**
   * `default`: this process's default share of every key (the family lease); `key`: the
   * key's own lease; `fallback`: a lapsed lease's safe fallback; `none`: nothing (no lease yet,
   * or everything lapsed).
   */
  readonly source: 'default' | 'key' | 'fallback' | 'none'
  /** A keyed quota's: the window this budget is of (the coordinator counts what is spent in it). */
  readonly window?: number | undefined
}

/** The events of a keyed family: each family lease received, and each change of mode. */
export interface KeyedEvents {
  lease: [lease: LeaseGrant]
  mode: [mode: 'leased' | 'lapsed' | 'none']
}

/** What the family needs of the client that owns it. */
export interface KeyedOwner {
  requestEarlyReport(): void
  drained(): void
}

/** One key as this process knows it. Fields set in the constructor: a stable shape. */
class KeyState {
  readonly key: string
  readonly bucket: TokenBucket
  /** Slots in use (concurrency). */
  inFlight = 0
  /** Whole slots allowed now (concurrency). */
  slots = 0
  /** The family epoch (or key lease change) the bucket's rate was set for. */
  epoch = -1
  /** When what this key may use changes by time alone (a lease lapsing), on the hot clock. */
  changeAtMs = Infinity
  asked = 0
  refused = 0
  peak = 0
  /** When a report last found this key asked for here (on the client's clock). */
  askedAtMs = -Infinity
  /** The key's own lease, once it had one: the default share never applies again. */
  lease: LeaseGrant | undefined = undefined
  leaseUntilMs = 0
  fallbackUntilMs = 0
  leaseProof: LeaseProof | undefined = undefined
  /** Not reported before this (the coordinator refused to lease it on its own). */
  quietUntilMs = 0
  lastUsedMs = 0
  movedMs = 0
  /** Quota: units spent in window `usedWindow` (the default share's and the key lease's alike). */
  used = 0
  usedWindow = Number.NaN
  /** Quota: the window of the budget in force (`slots`), and when spending it ends (hot clock). */
  window = Number.NaN
  endAtMs = 0
  /** Callers waiting in `acquire` for this key, in order (made when the first one waits). */
  waiters: WaitQueue<Permit> | undefined = undefined

  constructor(key: string, bucket: TokenBucket) {
    this.key = key
    this.bucket = bucket
  }

  /** Whether it may be forgotten: nothing of it in use, nothing owed, no lease of its own. */
  evictable(): boolean {
    return (
      this.lease === undefined &&
      this.inFlight === 0 &&
      this.waiters === undefined &&
      this.bucket.msUntilFull() === 0
    )
  }
}

const noPermit: Permit = Object.freeze({ release: () => undefined })

/** Callers one key may have waiting in `acquire` at once (past it: SLUICE_ERR_CLIENT_QUEUE_FULL). */
const maxWaitersPerKey = 10_000

/**
 * One key of a family seen as a shared limit (what the HTTP edge uses for a
 * resource): the family's own cursor is moved from key to key without
 * allocating; `detach` makes one that stays on its key (for a wait).
 */
export class KeyView {
  readonly #family: KeyedFamily
  key = ''

  constructor(family: KeyedFamily, key: string) {
    this.#family = family
    this.key = key
  }

  /** The name the HTTP headers give this limit: the family's prefix. */
  get id(): string {
    return this.#family.prefix
  }

  tryAcquire(cost = 1): boolean {
    return this.#family.tryAcquire(this.key, cost)
  }

  msUntil(cost = 1): number {
    return this.#family.msUntil(this.key, cost)
  }

  acquire(
    cost = 1,
    options: { maxWaitMs?: number | undefined; signal?: AbortSignal | undefined } = {},
  ): Promise<Permit> {
    return this.#family.acquire(this.key, cost, options)
  }

  /** The key's configured limit, what a caller is held to (not this process's share of it). */
  describe(): { ratePerSec: number; burst: number; windowSec?: number } {
    const limits = this.#family.limitOf(this.key)
    const windowSec = this.#family.windowSec
    // A quota's limit is a budget per window.
    if (windowSec !== undefined)
      return { ratePerSec: limits.capacity / windowSec, burst: limits.capacity, windowSec }
    return { ratePerSec: limits.capacity, burst: limits.burst }
  }

  remaining(): number {
    return this.#family.remaining(this.key)
  }

  msUntilReset(): number {
    return this.#family.msUntilFull(this.key)
  }

  detach(): KeyView {
    return new KeyView(this.#family, this.key)
  }
}

/**
 * A keyed family as one process enforces it: every key of `<prefix>/*` is a
 * limit of its own, shared by the processes that use it. This process holds
 * a default share of every key (the family lease: a fraction of each key's
 * capacity), so a key's first request is decided here at once; a key whose
 * demand here passes that share is reported, and the coordinator leases it
 * on its own (the key's lease then rules here, never the default again).
 *
 * `tryAcquire(key, cost)` is the hot path: a map look-up and a token bucket;
 * no promise, no timer, and no allocation for a key already tracked.
 */
export class KeyedFamily extends EventEmitter<KeyedEvents> {
  readonly prefix: string
  /** The family's own resource id, `<prefix>/*`. */
  readonly familyId: string
  readonly weight: number | undefined
  readonly #clock: Clock
  readonly #hotClock: Clock
  readonly #owner: KeyedOwner
  readonly #maxKeys: number
  readonly #maxKeysPerReport: number
  readonly #keys = new Map<string, KeyState>()
  readonly #view: KeyView = new KeyView(this, '')
  /** Bumped whenever the default share in force changes. */
  #epoch = 0
  #lease: LeaseGrant | undefined = undefined
  /** The default share in force: the lease's, its fallback while the hold lasts, then 0. */
  #share = 0
  #fallback = 0
  #kind: ResourceKind = 'rate'
  /** What the kind is (kindTraits): how a key is enforced asks here, not the kind's name. */
  #traits: KindTraits = kindTraits.rate
  /** The family's limit of a key not in the plan, as one object (read per request by the HTTP edge). */
  #defaultLimits: { readonly capacity: number; readonly burst: number } = { capacity: 0, burst: 0 }
  #plan: Readonly<Record<string, { capacity: number; burst: number }>> = {}
  /** What a new key's bucket holds of the burst at once: the share before its last rise. */
  #baseShare = 0
  /** When the share last rose, on the hot clock. */
  #increasedAtMs = 0
  /** Quota: the family lease's window, and when spending its default share ends (hot clock). */
  #windowIndex = Number.NaN
  #windowEndAtMs = 0
  #windowLengthMs = 0
  #refreshMs = 1000
  #expiry: Timer | undefined = undefined
  #hold: Timer | undefined = undefined
  #windowStartMs: number
  #familyAsked = 0
  #refusedError: SluiceError | undefined = undefined
  readonly #readyWaiters: { resolve: () => void; reject: (e: SluiceError) => void }[] = []
  #closed = false
  /** Keys with callers waiting in `acquire`, and the one timer that wakes them as buckets refill. */
  readonly #waiting = new Set<KeyState>()
  #wake: Timer | undefined = undefined
  /** Keys refused because every tracked key was in use (maxKeys), since the start. */
  keysFull = 0

  constructor(
    prefix: string,
    options: KeyedOptions,
    clock: Clock,
    hotClock: Clock,
    owner: KeyedOwner,
  ) {
    super()
    this.prefix = prefix
    this.familyId = familyIdOf(prefix)
    this.weight = options.weight
    this.#clock = clock
    this.#hotClock = hotClock
    this.#owner = owner
    this.#maxKeys = options.maxKeys ?? 50_000
    this.#maxKeysPerReport = options.maxKeysPerReport ?? 64
    this.#windowStartMs = clock.now()
  }

  /** `leased` while a family lease is in force, `lapsed` on its fallback, `none` before any or after. */
  get mode(): 'leased' | 'lapsed' | 'none' {
    return this.#lease !== undefined ? 'leased' : this.#share > 0 ? 'lapsed' : 'none'
  }

  /** The family lease in force (its `capacity` is the default share, a fraction of every key). */
  get lease(): LeaseGrant | undefined {
    return this.#lease
  }

  /** Keys tracked in this process now. */
  get size(): number {
    return this.#keys.size
  }

  /** Why the coordinator refuses this family, while it does. */
  get refused(): SluiceError | undefined {
    return this.#refusedError
  }

  /** A keyed quota's window, seconds (undefined for a rate or concurrency family). */
  get windowSec(): number | undefined {
    return this.#traits.perWindow ? Math.max(1, Math.round(this.#windowLengthMs / 1000)) : undefined
  }

  /**
   * Takes `cost` of `key` at once if what this process may use of it allows:
   * the policing check. For a concurrency family a `true` must be paired with
   * `release(key, cost)`. Throws SLUICE_ERR_KEY_INVALID for a key the
   * protocol cannot carry (`keyProblem`: empty, over 256 characters, a
   * control character, or `*`); such a key is never tracked nor reported.
   */
  tryAcquire(key: string, cost = 1): boolean {
    const state = this.#state(key)
    if (state === undefined) return false
    state.asked += cost
    this.#familyAsked += cost
    // Never ahead of a caller already waiting for the key (FIFO, as a named resource).
    if (state.waiters === undefined && this.#take(state, cost)) return true
    return this.#refuse(state, cost)
  }

  /**
   * Waits until `cost` of `key` is admitted (a slot's permit for concurrency),
   * in FIFO order with the key's other waiters (a WaitQueue per key that has
   * any, as a named resource has one), up to `maxWaitMs`; rejects with
   * SLUICE_ERR_CLIENT_TIMEOUT, SLUICE_ERR_CLIENT_ABORTED,
   * SLUICE_ERR_CLIENT_QUEUE_FULL or SLUICE_ERR_CLIENT_CLOSED (and
   * SLUICE_ERR_KEY_INVALID for a key the protocol cannot carry). Waiters are
   * served as the key's bucket refills (one timer for the family, re-armed
   * for the soonest), as slots are released, and as leases change.
   */
  acquire(
    key: string,
    cost = 1,
    options: { maxWaitMs?: number | undefined; signal?: AbortSignal | undefined } = {},
  ): Promise<Permit> {
    if (this.#closed)
      return Promise.reject(new SluiceError('SLUICE_ERR_CLIENT_CLOSED', this.familyId))
    let state: KeyState | undefined
    try {
      state = this.#state(key)
    } catch (error) {
      // The key rule's coded error (#state checks a new key), as a rejection.
      return Promise.reject(error instanceof Error ? error : new Error(String(error)))
    }
    const what = keyIdOf(this.prefix, key)
    if (state === undefined)
      return Promise.reject(
        new SluiceError(
          'SLUICE_ERR_CLIENT_QUEUE_FULL',
          `${what}: ${this.#maxKeys} keys are tracked, every one in use (maxKeys)`,
        ),
      )
    state.asked += cost
    this.#familyAsked += cost
    if (state.waiters === undefined && this.#take(state, cost))
      return Promise.resolve(this.#permitFor(key, cost))
    this.#refuse(state, cost)
    const waiters = (state.waiters ??= new WaitQueue<Permit>(this.#clock, maxWaitersPerKey, () =>
      this.#serve(state),
    ))
    const waiting = waiters.enqueue(cost, options, what)
    this.#waiting.add(state)
    this.#serve(state)
    return waiting
  }

  /** Gives back slots of `key` taken by `tryAcquire` (concurrency): its waiters may be served. */
  release(key: string, cost = 1): void {
    const state = this.#keys.get(key)
    if (state === undefined) return
    state.inFlight = Math.max(0, state.inFlight - cost)
    if (state.waiters !== undefined) this.#serve(state)
    this.#owner.drained()
  }

  /** Admits `cost` of the key if what it may use now allows (no metering: the caller's). */
  #take(state: KeyState, cost: number): boolean {
    this.#refreshIfStale(state)
    if (this.#traits.holdsInFlight) {
      if (state.inFlight + cost > state.slots) return false
      state.inFlight += cost
      if (state.inFlight > state.peak) state.peak = state.inFlight
      return true
    }
    if (this.#traits.perWindow) {
      // Spent from the window's budget in force; nothing refills it before the next window.
      if (state.used + cost > state.slots || this.#hotClock.now() >= state.endAtMs) return false
      state.used += cost
      return true
    }
    return state.bucket.tryTake(cost)
  }

  /** What a caller admitted for `cost` of `key` holds: a slot's permit, or nothing to give back. */
  #permitFor(key: string, cost: number): Permit {
    return this.#traits.holdsInFlight ? this.#permit(key, cost) : noPermit
  }

  /**
   * Serves the key's waiters in order while it admits them; a key left with
   * none drops its queue. Then (re-)arms the family's one wake timer for the
   * soonest a waiting key's bucket has its head's cost.
   */
  #serve(state: KeyState): void {
    const waiters = state.waiters
    if (waiters === undefined) return
    waiters.serve(
      (cost) => this.#take(state, cost),
      (cost) => this.#permitFor(state.key, cost),
    )
    if (waiters.length === 0) {
      state.waiters = undefined
      this.#waiting.delete(state)
    }
    this.#armWake()
  }

  /** Serves every waiting key (what they may use has changed: a lease, a lapse). */
  #serveAll(): void {
    for (const state of [...this.#waiting]) this.#serve(state)
  }

  #armWake(): void {
    this.#wake?.cancel()
    this.#wake = undefined
    if (this.#waiting.size === 0 || !this.#traits.refills) return
    let soonestMs = Infinity
    for (const state of this.#waiting) {
      const head = state.waiters?.headCost()
      if (head !== undefined) soonestMs = Math.min(soonestMs, state.bucket.msUntil(head))
    }
    if (!Number.isFinite(soonestMs)) return
    this.#wake = this.#clock
      .setTimeout(
        () => {
          this.#wake = undefined
          this.#serveAll()
        },
        Math.max(1, Math.ceil(soonestMs)),
      )
      .unref()
  }

  /** The key's cursor as a shared limit (see KeyView), moved to `key`. */
  view(key: string): KeyView {
    this.#view.key = key
    return this.#view
  }

  /** Milliseconds until `cost` of `key` would be admitted here (Infinity: not by waiting). */
  msUntil(key: string, cost = 1): number {
    const state = this.#keys.get(key)
    if (state === undefined) {
      const { burst } = this.leaseOf(key)
      // A key not tracked yet starts with what its share holds of the burst: at once, or never
      // by waiting here (its bucket is made on its first check).
      return burst >= cost ? 0 : Infinity
    }
    if (this.#traits.holdsInFlight) return state.inFlight + cost <= state.slots ? 0 : Infinity
    if (this.#traits.perWindow) {
      const nowMs = this.#hotClock.now()
      const leftMs = state.endAtMs - nowMs
      if (state.used + cost <= state.slots && leftMs > 0) return 0
      // This process's default share of the key is spent: the key is leased on its own within a
      // report or two, from what the other processes leave of its budget.
      if (!this.#keyLeaseRules(state) && this.#windowEndAtMs > nowMs)
        return quotaHorizonMs(this.#refreshMs)
      // Its own budget spent (as a named quota's block): the next window's.
      return leftMs > 0 ? leftMs : Infinity
    }
    return state.bucket.msUntil(cost)
  }

  /** Whole tokens (or slots) of `key` available here now. */
  remaining(key: string): number {
    const state = this.#keys.get(key)
    if (state === undefined) return Math.floor(this.leaseOf(key).burst)
    if (this.#traits.holdsInFlight) return Math.max(0, state.slots - state.inFlight)
    if (this.#traits.perWindow) {
      this.#refreshIfStale(state)
      return Math.max(0, state.slots - state.used)
    }
    return Math.floor(state.bucket.tokens)
  }

  /** Milliseconds until `key`'s bucket is full again here (0 for slots; a quota's: the window's end). */
  msUntilFull(key: string): number {
    if (this.#traits.perWindow) return Math.max(0, this.#windowEndAtMs - this.#hotClock.now())
    const state = this.#keys.get(key)
    if (state === undefined || this.#traits.holdsInFlight) return 0
    return state.bucket.msUntilFull()
  }

  /** What this process may use of `key` now. */
  leaseOf(key: string): KeyLease {
    const state = this.#keys.get(key)
    if (this.#traits.perWindow) {
      const q = this.#quotaNow(key, state)
      const source =
        q.capacity === 0 && q.endAtMs === 0
          ? 'none'
          : state?.lease !== undefined && q.window === state.lease.window?.index
            ? 'key'
            : 'default'
      return Number.isNaN(q.window)
        ? { capacity: q.capacity, burst: q.capacity, source }
        : { capacity: q.capacity, burst: q.capacity, source, window: q.window }
    }
    if (state !== undefined && state.lease !== undefined) {
      const nowMs = this.#hotClock.now()
      if (nowMs < state.leaseUntilMs)
        return { capacity: state.lease.capacity, burst: state.lease.burst, source: 'key' }
      if (nowMs < state.fallbackUntilMs) {
        const { capacity, burst } = this.#keyFallback(state.lease)
        return { capacity, burst, source: 'fallback' }
      }
      return { capacity: 0, burst: 0, source: 'none' }
    }
    const { capacity, burst } = this.#keyLimits(key)
    if (this.#share <= 0) return { capacity: 0, burst: 0, source: 'none' }
    return {
      capacity: shareOfKey(this.#kind, this.#share, capacity),
      burst: shareOfKey(this.#kind, this.#share, burst),
      source: this.#lease !== undefined ? 'default' : 'fallback',
    }
  }

  /** The capacity a key is configured with (the plan's, else the family's): what callers are held to. */
  limitOf(key: string): { capacity: number; burst: number } {
    return this.#keyLimits(key)
  }

  /** Resolves at the first family lease; rejects when the coordinator refuses the family or the client stops. */
  ready(options: { timeoutMs?: number | undefined } = {}): Promise<void> {
    if (this.#lease !== undefined) return Promise.resolve()
    if (this.#refusedError !== undefined) return Promise.reject(this.#refusedError)
    return new Promise((resolve, reject) => {
      let timer: Timer | undefined
      const waiter = {
        resolve: () => {
          timer?.cancel()
          resolve()
        },
        reject: (e: SluiceError) => {
          timer?.cancel()
          reject(e)
        },
      }
      if (options.timeoutMs !== undefined)
        timer = this.#clock.setTimeout(() => {
          const i = this.#readyWaiters.indexOf(waiter)
          if (i >= 0) this.#readyWaiters.splice(i, 1)
          reject(
            new SluiceError(
              'SLUICE_ERR_CLIENT_TIMEOUT',
              `${this.familyId}: no family lease within ${options.timeoutMs} ms (is the coordinator reachable?)`,
            ),
          )
        }, options.timeoutMs)
      this.#readyWaiters.push(waiter)
    })
  }

  // ---- driven by the client ----

  /** A family lease: the default share of every key, and what a key is. */
  applyFamilyLease(grant: LeaseGrant): boolean {
    if (this.#closed) return true
    const family = grant.family
    if (family === undefined) {
      // The id matched a template that is not keyed: nothing here would hold per key.
      this.refuse(
        new SluiceError(
          'SLUICE_ERR_RESOURCE_UNKNOWN',
          `${this.familyId}: the template matching it is not keyed; give it keyed: true`,
          { resource: this.familyId },
        ),
      )
      return true
    }
    {
      this.#kind = family.kind
      this.#traits = kindTraits[family.kind]
      if (
        this.#defaultLimits.capacity !== family.capacity ||
        this.#defaultLimits.burst !== family.burst
      )
        this.#defaultLimits = Object.freeze({ capacity: family.capacity, burst: family.burst })
      this.#plan = family.plan ?? {}
    }
    this.#expiry?.cancel()
    this.#hold?.cancel()
    this.#hold = undefined
    const before = this.mode
    this.#lease = grant
    const changed = this.#share !== grant.capacity
    // A key first asked for after this starts with what the old share held of its burst, plus
    // what the new one has earned since: capacity that moved here brings no burst with it
    // (the process it came from may have spent it just before), so the bound capacity·t +
    // burst holds across the move.
    if (grant.capacity > this.#share) {
      this.#baseShare = this.#share
      this.#increasedAtMs = this.#hotClock.now()
    } else this.#baseShare = grant.capacity
    this.#share = grant.capacity
    this.#fallback = safeFallback(grant)
    this.#refreshMs = grant.refreshMs
    // A window's number never goes back here (QuotaEnforcer.window says why).
    if (grant.window !== undefined && !(grant.window.index < this.#windowIndex)) {
      this.#windowIndex = grant.window.index
      this.#windowEndAtMs = this.#hotClock.now() + grant.window.endsInMs
      this.#windowLengthMs = grant.window.lengthMs
    }
    this.#epoch++
    // A new share takes effect on every key now, not at each key's next use: a bucket must not
    // go on earning at the old rate after the ack says the new one is in force.
    if (changed) this.#refreshDefaults()
    this.#expiry = this.#clock.setTimeout(() => this.#lapse(grant), grant.ttlMs).unref()
    this.#refusedError = undefined
    if (before !== 'leased') this.emit('mode', 'leased')
    this.emit('lease', grant)
    for (const w of this.#readyWaiters.splice(0)) w.resolve()
    if (this.#waiting.size > 0) this.#serveAll()
    return this.fits()
  }

  /** A key's own lease: from now on it rules this key here, never the default share again. */
  applyKeyLease(key: string, grant: LeaseGrant): boolean {
    if (this.#closed) return true
    if (grant.toDefault === true) return this.#toDefault(key)
    // A key's lease may come before any family lease (the key went hot as this process joined):
    // it says the kind, so a quota's budget is never taken for a bucket's rate.
    if (grant.kind !== this.#kind) {
      this.#kind = grant.kind
      this.#traits = kindTraits[grant.kind]
      this.#epoch++
    }
    let state = this.#keys.get(key)
    if (state === undefined) {
      // Leased without asking (it went hot elsewhere): tracked whatever the bound, since
      // forgetting it would bring back the default share here.
      state = this.#newState(key)
      this.#keys.set(key, state)
    }
    const nowMs = this.#hotClock.now()
    state.lease = grant
    state.leaseProof = grant.proof
    state.leaseUntilMs = nowMs + grant.ttlMs
    state.fallbackUntilMs = state.leaseUntilMs + grant.safeHoldMs
    state.epoch = -1
    this.#refresh(state)
    if (state.waiters !== undefined) this.#serve(state)
    // A quota's budget is in force once what this process spent of the key in its window fits it.
    if (this.#traits.perWindow) return state.used <= state.slots
    return !this.#traits.holdsInFlight || state.inFlight <= state.slots
  }

  /** Whether every key's slots in use fit what the family and key leases now allow (a decrease may be acknowledged). */
  fits(): boolean {
    // A keyed quota's share is never cut within a window (a new window starts anew).
    if (!this.#traits.holdsInFlight) return true
    for (const state of this.#keys.values()) {
      this.#refresh(state)
      if (state.inFlight > state.slots) return false
    }
    return true
  }

  /** Whether the key's slots in use (or a quota's units spent) fit its limit now. */
  keyFits(key: string): boolean {
    const state = this.#keys.get(key)
    if (state === undefined || this.#traits.refills) return true
    this.#refresh(state)
    return this.#traits.perWindow ? state.used <= state.slots : state.inFlight <= state.slots
  }

  /**
   * The entries of a demand report: the family (its traffic, so the
   * coordinator knows who uses it most), the keys this process holds a lease
   * of, and up to `maxKeysPerReport` keys whose demand passed the default
   * share, most wanted first. Starts a new window. A keyed quota's leased
   * keys say what they used of their window's budget.
   */
  takeReport(): {
    resource: string
    wants: number
    weight?: number
    used?: number
    window?: number
  }[] {
    const nowMs = this.#clock.now()
    const elapsedSec = Math.max(0.001, (nowMs - this.#windowStartMs) / 1000)
    this.#windowStartMs = nowMs
    const hotNow = this.#hotClock.now()
    const out: {
      resource: string
      wants: number
      weight?: number
      used?: number
      window?: number
    }[] = [
      {
        resource: this.familyId,
        wants: this.#familyAsked / elapsedSec,
        ...(this.weight === undefined ? {} : { weight: this.weight }),
      },
    ]
    this.#familyAsked = 0
    const candidates: { state: KeyState; wants: number }[] = []
    for (const state of this.#keys.values()) {
      // Callers waiting in acquire are demand too, every period they wait (as a named resource's).
      const waiting = state.waiters?.totalCost() ?? 0
      const wants = this.#traits.holdsInFlight
        ? Math.max(state.peak, state.inFlight) + waiting
        : (state.asked + waiting) / elapsedSec
      const refused = state.refused + waiting
      state.asked = 0
      state.refused = 0
      state.peak = state.inFlight
      const quota = this.#traits.perWindow
      if (wants > 0) state.askedAtMs = nowMs
      if (state.lease !== undefined && (!quota || this.#keyLeaseRules(state))) {
        // Leased on its own: report while it is asked for here (lately), so it is renewed, grown
        // or shrunk. A key leased without being asked for here (it went hot elsewhere: the
        // lease of 0, or a share seeded from the default) is never reported as this process's
        // demand: what the coordinator leased here unasked goes back, and a key nobody asks for
        // goes cold (docs/keys.md).
        const lately = state.lease.capacity > 0 && nowMs - state.askedAtMs <= 3 * this.#refreshMs
        if (!quota) {
          if (wants > 0 || lately) out.push({ resource: keyIdOf(this.prefix, state.key), wants })
          continue
        }
        this.#refreshIfStale(state)
        const window = state.lease.window!.index
        const used = state.usedWindow === window ? state.used : 0
        if (wants > 0 || lately || used > 0)
          out.push({ resource: keyIdOf(this.prefix, state.key), wants, used, window })
        continue
      }
      if (hotNow < state.quietUntilMs) continue
      if (quota) {
        // On the default share of a budget: reported once refused, or once the pace asked for
        // would spend what is left within two refresh periods.
        this.#refreshIfStale(state)
        const left = state.slots - state.used
        if (refused > 0 || (wants > 0 && wants * (quotaHorizonMs(this.#refreshMs) / 1000) >= left))
          candidates.push({ state, wants })
        continue
      }
      const mine = this.leaseOf(state.key).capacity
      if (refused > 0 || wants > mine * 1.0001) candidates.push({ state, wants })
    }
    candidates.sort((a, b) => b.wants - a.wants)
    for (const c of candidates.slice(0, this.#maxKeysPerReport)) {
      const state = c.state
      // A quota's key says what it spent of the window's default share: the coordinator's first
      // budget for it then starts from that, not below it (a budget below what was spent could
      // not be acknowledged, and the key would be refused until the next report).
      if (this.#traits.perWindow && state.used > 0 && state.usedWindow === state.window)
        out.push({
          resource: keyIdOf(this.prefix, state.key),
          wants: c.wants,
          used: state.used,
          window: state.usedWindow,
        })
      else out.push({ resource: keyIdOf(this.prefix, state.key), wants: c.wants })
    }
    return out
  }

  /** The coordinator will not lease `key` on its own now (too many hot keys): ask again later. */
  quietKey(key: string): void {
    const state = this.#keys.get(key)
    if (state !== undefined) state.quietUntilMs = this.#hotClock.now() + 10_000
  }

  /** What a hello reports: the family lease and each key's own lease in force, for a learning coordinator. */
  holdings(): { resource: string; capacity: number; proof?: LeaseProof }[] {
    const out: { resource: string; capacity: number; proof?: LeaseProof }[] = []
    if (this.#share > 0)
      out.push({
        resource: this.familyId,
        capacity: this.#share,
        ...(this.#lease?.proof === undefined ? {} : { proof: this.#lease.proof }),
      })
    for (const state of this.#keys.values()) {
      if (state.lease === undefined) continue
      const { capacity } = this.leaseOf(state.key)
      if (capacity > 0 || state.inFlight > 0)
        out.push({
          resource: keyIdOf(this.prefix, state.key),
          capacity: Math.max(capacity, state.inFlight),
          ...(state.leaseProof === undefined ? {} : { proof: state.leaseProof }),
        })
    }
    return out
  }

  /** The ids of everything this family holds a lease of, for a release. */
  leasedIds(): string[] {
    const ids = [this.familyId]
    for (const state of this.#keys.values())
      if (state.lease !== undefined) ids.push(keyIdOf(this.prefix, state.key))
    return ids
  }

  /** The coordinator refuses the family: ready() rejects with it. */
  refuse(error: SluiceError): void {
    this.#refusedError = error
    for (const w of this.#readyWaiters.splice(0)) w.reject(error)
  }

  /** Another process took this client's id over: nothing is enforced until a new lease comes. */
  revoke(): void {
    this.#expiry?.cancel()
    this.#hold?.cancel()
    this.#lease = undefined
    this.#share = 0
    this.#fallback = 0
    this.#baseShare = 0
    this.#epoch++
    for (const state of this.#keys.values()) {
      if (state.lease === undefined) continue
      state.leaseUntilMs = 0
      state.fallbackUntilMs = 0
      state.epoch = -1
    }
    this.emit('mode', 'none')
  }

  close(): void {
    this.#closed = true
    this.#expiry?.cancel()
    this.#hold?.cancel()
    this.#wake?.cancel()
    for (const w of this.#readyWaiters.splice(0))
      w.reject(new SluiceError('SLUICE_ERR_CLIENT_CLOSED', this.familyId))
    for (const state of this.#waiting) {
      state.waiters?.rejectAll('SLUICE_ERR_CLIENT_CLOSED', keyIdOf(this.prefix, state.key))
      state.waiters = undefined
    }
    this.#waiting.clear()
  }

  // ---- internals ----

  /** The state of `key`, made if new (evicting an idle key at the bound), refreshed if stale. */
  #state(key: string): KeyState | undefined {
    let state = this.#keys.get(key)
    if (state === undefined) {
      // Checked once, where a key enters: a key the protocol cannot carry would make the next
      // report malformed, and the coordinator close the connection (every limit of the process).
      const problem = keyProblem(this.prefix, key)
      if (problem !== undefined)
        throw new SluiceError('SLUICE_ERR_KEY_INVALID', `${this.prefix}: ${problem}`)
      if (this.#keys.size >= this.#maxKeys && !this.#evictOne()) {
        this.keysFull++
        return undefined
      }
      state = this.#newState(key)
      this.#keys.set(key, state)
    } else {
      const nowMs = this.#hotClock.now()
      // Least recently used order, kept cheaply: a key moves to the end at most once a second.
      if (nowMs - state.movedMs > 1000) {
        this.#keys.delete(key)
        this.#keys.set(key, state)
        state.movedMs = nowMs
      }
      state.lastUsedMs = nowMs
    }
    this.#refreshIfStale(state)
    return state
  }

  #newState(key: string): KeyState {
    if (this.#traits.perWindow) {
      // A quota spends a budget, not a bucket: the bucket stays empty (the shape stays one).
      const state = new KeyState(key, new TokenBucket(this.#hotClock, 0, 0, 0))
      state.movedMs = this.#hotClock.now()
      this.#refresh(state)
      return state
    }
    const { capacity, burst } = this.#limitsNow(key, undefined)
    // A new key's bucket starts full of what the share holds of its burst (earned since a rise,
    // see applyFamilyLease); so a new key's first request is decided here at once.
    const limits = this.#keyLimits(key)
    const earnedMs = this.#hotClock.now() - this.#increasedAtMs
    const initial = Math.min(
      burst,
      this.#baseShare * limits.burst + (capacity * Math.max(0, earnedMs)) / 1000,
    )
    const state = new KeyState(key, new TokenBucket(this.#hotClock, capacity, burst, initial))
    state.epoch = this.#epoch
    state.slots = capacity
    state.movedMs = this.#hotClock.now()
    return state
  }

  /**
   * The key went cold at the coordinator: its own lease is dropped and the
   * default share rules it again. The coordinator sends this only once every
   * lease of the key commits nothing (this one is 0, or lapsed), so the
   * bucket holds no token of it: it earns its default share from empty.
   */
  #toDefault(key: string): boolean {
    const state = this.#keys.get(key)
    if (state === undefined || state.lease === undefined) return true
    state.lease = undefined
    state.leaseProof = undefined
    state.leaseUntilMs = 0
    state.fallbackUntilMs = 0
    state.quietUntilMs = 0
    state.epoch = -1
    // Whatever a lapsed lease left in the bucket is not carried over: the default share starts
    // it from empty, as a new key's share is started from what it has earned.
    state.bucket.setRate(0, 0)
    this.#refresh(state)
    if (state.waiters !== undefined) this.#serve(state)
    return true
  }

  /** Frees room for a new key: the least recently used key that holds nothing. */
  #evictOne(): boolean {
    let looked = 0
    for (const [key, state] of this.#keys) {
      if (this.#traits.perWindow ? this.#quotaEvictable(state) : state.evictable()) {
        this.#keys.delete(key)
        return true
      }
      if (++looked >= 32) break
    }
    return false
  }

  /**
   * Whether a key of a keyed quota may be forgotten: nothing spent of it in the family's
   * window, and no lease of its own for that window (either would be lost, and the key would
   * come back with a whole default share).
   */
  #quotaEvictable(state: KeyState): boolean {
    if (state.waiters !== undefined) return false
    const window = this.#windowIndex
    if (state.lease !== undefined && this.#keyLeaseRules(state)) return false
    return state.used === 0 || !(state.usedWindow >= window)
  }

  /** Quota: whether the key's own lease rules it (it is of the family lease's window, or newer). */
  #keyLeaseRules(state: KeyState): boolean {
    const w = state.lease?.window?.index
    return w !== undefined && !(w < this.#windowIndex)
  }

  /**
   * A keyed quota's budget of `key` now: its own lease's when that is of the
   * family lease's window (or newer: the pool leases a key of a new window
   * with the family's first lease of it, or before), else the default share
   * of the family lease's window. A key leased on its own in a window never
   * takes the default share of that window.
   */
  #quotaNow(
    key: string,
    state: KeyState | undefined,
  ): { capacity: number; window: number; endAtMs: number } {
    if (state?.lease?.window !== undefined && this.#keyLeaseRules(state))
      return {
        capacity: state.lease.capacity,
        window: state.lease.window.index,
        endAtMs: state.leaseUntilMs,
      }
    if (this.#share <= 0 || Number.isNaN(this.#windowIndex))
      return { capacity: 0, window: Number.NaN, endAtMs: 0 }
    return {
      capacity: shareOfKey(this.#kind, this.#share, this.#keyLimits(key).capacity),
      window: this.#windowIndex,
      endAtMs: this.#windowEndAtMs,
    }
  }

  #refreshIfStale(state: KeyState): void {
    if (state.epoch !== this.#epoch || this.#hotClock.now() >= state.changeAtMs)
      this.#refresh(state)
  }

  /** Sets the key's bucket (or slots) to what it may use now. */
  #refresh(state: KeyState): void {
    if (this.#traits.perWindow) {
      const q = this.#quotaNow(state.key, state)
      state.slots = q.capacity
      // A newer window: a new budget, nothing spent of it yet.
      if (q.window > state.usedWindow || Number.isNaN(state.usedWindow)) {
        if (!Number.isNaN(q.window)) {
          state.used = 0
          state.usedWindow = q.window
        }
      }
      state.window = q.window
      state.endAtMs = q.endAtMs
      // Once spent to its end, nothing changes by time alone until a new lease comes.
      state.changeAtMs = this.#hotClock.now() < q.endAtMs ? q.endAtMs : Infinity
      state.epoch = this.#epoch
      return
    }
    const { capacity, burst, changeAtMs } = this.#limitsNow(state.key, state)
    state.bucket.setRate(capacity, burst)
    state.slots = capacity
    state.changeAtMs = changeAtMs
    state.epoch = this.#epoch
  }

  /** What `key` may use now, and when that changes by time alone. */
  #limitsNow(
    key: string,
    state: KeyState | undefined,
  ): { capacity: number; burst: number; changeAtMs: number } {
    const lease = state?.lease
    if (lease !== undefined && state !== undefined) {
      const nowMs = this.#hotClock.now()
      if (nowMs < state.leaseUntilMs)
        return { capacity: lease.capacity, burst: lease.burst, changeAtMs: state.leaseUntilMs }
      if (nowMs < state.fallbackUntilMs)
        return { ...this.#keyFallback(lease), changeAtMs: state.fallbackUntilMs }
      return { capacity: 0, burst: 0, changeAtMs: Infinity }
    }
    const limits = this.#keyLimits(key)
    const share = this.#share
    return {
      capacity: shareOfKey(this.#kind, share, limits.capacity),
      burst: shareOfKey(this.#kind, share, limits.burst),
      changeAtMs: Infinity,
    }
  }

  /** A key lease's safe fallback (shared/lease-math.ts: what the coordinator counts). */
  #keyFallback(lease: LeaseGrant): { capacity: number; burst: number } {
    const capacity = safeFallback(lease)
    return { capacity, burst: fallbackBurst(lease, capacity) }
  }

  /** A key's limits: the plan's, else the family's (shared/lease-math.ts, as config/resolve.ts). */
  #keyLimits(key: string): { capacity: number; burst: number } {
    return keyLimits(this.#plan, key, this.#defaultLimits)
  }

  #refuse(state: KeyState, cost: number): boolean {
    state.refused += cost
    this.#owner.requestEarlyReport()
    return false
  }

  #permit(key: string, cost: number): Permit {
    let released = false
    return {
      release: () => {
        if (released) return
        released = true
        this.release(key, cost)
      },
    }
  }

  /** Every key on the default share takes the share in force now. */
  #refreshDefaults(): void {
    for (const state of this.#keys.values()) if (state.lease === undefined) this.#refresh(state)
  }

  /** The family lease ran out unrenewed: its fallback for the hold, then nothing. */
  #lapse(lease: LeaseGrant): void {
    this.#expiry = undefined
    this.#lease = undefined
    this.#share = this.#fallback
    this.#baseShare = Math.min(this.#baseShare, this.#share)
    this.#epoch++
    this.#refreshDefaults()
    this.emit('mode', this.mode)
    this.#hold = this.#clock
      .setTimeout(() => {
        this.#hold = undefined
        this.#share = 0
        this.#fallback = 0
        this.#baseShare = 0
        this.#epoch++
        this.#refreshDefaults()
        this.emit('mode', 'none')
      }, lease.safeHoldMs)
      .unref()
  }
}
