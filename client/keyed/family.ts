import { EventEmitter } from 'node:events'
import {
  SluiceError,
  crowdedShare,
  domainLimits,
  familyIdOf,
  keyIdOf,
  keyOfId,
  keyProblem,
  preciseNow,
  quotaHorizonMs,
  type Clock,
  type LeaseGrant,
  type LeaseProof,
  type Timer,
} from '../../shared/index.js'
import { WaitQueue } from '../../shared/limiters/index.js'
import { DemandMeter } from '../demand-meter.js'
import type { Permit } from '../enforcer.js'
import type { FallHeld, HelloHolding, Holder } from '../holder.js'
import type { ResolvedKeyedOptions } from '../options.js'
import type { RemoteAnswer } from '../remote.js'
import { RiseWait, risingWaitMs } from '../rise.js'
import { KeyLeaseWaits, keyMoveFirstWaitMs } from './key-lease-waits.js'
import type { KeyKind } from './key-kind.js'
import type { KeyState } from './key-state.js'
import { KeyView } from './key-view.js'
import { closedKeys, keyKinds } from './kinds.js'
import { NextLeaseWaits } from './next-lease-waits.js'
import { chargedOf, keyLeaseRules } from './quota-keys.js'
import { FamilyShares } from './shares.js'
import type { KeyLease, KeyReport, KeySpent, KeyedEvents, KeyedOwner } from './types.js'

const noPermit: Permit = Object.freeze({ release: () => undefined })

/**
 * Checks a family holds at a quota window's edge at most (`NextLeaseWaits`), and as many while
 * its share rises: a gateway deciding 10,000 a second holds about 100 across a 10 ms edge.
 */
const maxNextLeaseWaits = 10_000

/** A check not answered (the family closed while it waited): refused, no retry time known. */
const notAnswered: RemoteAnswer = Object.freeze({ admitted: false, retryAfterMs: 0 })

/** Checks waiting for a key's own lease at once (`waitForKeyLease`): the coordinator's part's. */
const maxKeyLeaseWaits = 10_000

/** Callers one key may have waiting in `acquire` at once (past it: SLUICE_ERR_CLIENT_QUEUE_FULL). */
const maxWaitersPerKey = 10_000

/** Before a fall a joiner waits for: what a key never seen held, the plain buckets, the share. */
interface FallBefore {
  readonly level: number
  readonly plain: ReadonlySet<KeyState>
  readonly share: number
}

/**
 * A keyed family as one process enforces it: every key of `<prefix>/*` is a
 * limit of its own, shared by the processes that use it. This process holds
 * a default share of every key (the family lease: a fraction of each key's
 * capacity, FamilyShares), so a key's first request is decided here at once;
 * a key whose demand here passes that share is reported, and the
 * coordinator leases it on its own (the key's lease then rules here, until
 * the key goes cold and comes back to the default).
 *
 * How a key is enforced is its kind's (key-kind.ts: a bucket, slots, or a
 * window's budget, chosen by the lease's kind); this class holds the keys,
 * the leases, the waiters and the reports. It is the family's whole public
 * API (what `client.keyed()` returns), which is why it is longer than the
 * rooms around it.
 *
 * `tryAcquire(key, cost)` is the hot path: a map look-up and a token bucket;
 * no promise, no timer, and no allocation for a key already tracked.
 */
export class KeyedFamily extends EventEmitter<KeyedEvents> implements Holder {
  readonly prefix: string
  /** The family's own resource id, `<prefix>/*`. */
  readonly familyId: string
  readonly weight: number | undefined
  readonly #clock: Clock
  readonly #hotClock: Clock
  readonly #owner: KeyedOwner
  /** A key was leased here unasked: an early report should say what was spent of it. */
  #earlyReportWish = false
  readonly #maxKeys: number
  readonly #maxKeysPerReport: number
  readonly #keys = new Map<string, KeyState>()
  /**
   * Where the search for a key to forget goes on from (oldest first, around again at the end).
   * A search begun at the start each time walked every key deleted before it still in the
   * map's table: 5.6 of 10 s of a coordinator's CPU under a flood of new keys.
   */
  #evictCursor: MapIterator<[string, KeyState]> | undefined = undefined
  readonly #view: KeyView = new KeyView(this, '')
  /** What the family lease says every key may use here. */
  readonly #shares: FamilyShares
  /** How a key of the kind in force is enforced. */
  #keyKind: KeyKind = keyKinds.rate
  #expiry: Timer | undefined = undefined
  #hold: Timer | undefined = undefined
  /** When the demand being measured began (the last report). */
  #reportStartMs: number
  #familyAsked = 0
  /** What the keys admitted and refused together since the last report (the family's usage). */
  readonly #usage: DemandMeter
  #refusedError: SluiceError | undefined = undefined
  readonly #readyWaiters: { resolve: () => void; reject: (e: SluiceError) => void }[] = []
  #closed = false
  /** Whether any family lease of more than 0 ever came (a handover goes only to one that never held). */
  #everHeld = false
  /** When this family was made here (clock): the coordinator's part, just made, waits for its first share. */
  readonly #madeAtMs: number
  /**
   * What the default share held of a key never seen here (a share of its burst) just before the
   * last family lease, and when (hot clock): a key leased on its own in the same batch starts
   * with no more (`applyKeyLease`).
   */
  #priorShare = { atMs: Number.NaN, earned: 0 }
  /** What the last fall a joiner waited for gave up, until its ack takes it (`takeFallHeld`). */
  #fallHeld: FallHeld | undefined = undefined
  /** Tokens a key's own lease gave up as it fell, by the key's resource id, until its ack takes them (`takeGave`). */
  #keyGave: Map<string, number> | undefined = undefined
  /** Keys with callers waiting in `acquire`, and the one timer that wakes them as buckets refill. */
  readonly #waiting = new Set<KeyState>()
  #wake: Timer | undefined = undefined
  /** Checks waiting for a key's own lease (`waitForKeyLease`). */
  readonly #keyLeaseWaits: KeyLeaseWaits
  /** Checks made at a quota window's edge, waiting for the next window's lease (`decide`). */
  readonly #edgeWaits: NextLeaseWaits
  /** A family lease of 0 that says a share is rising to this process (client/rise.ts). */
  readonly #rise: RiseWait
  /** Checks this process's part could not decide while its share rises, waiting for it. */
  readonly #riseWaits: NextLeaseWaits
  /** Keys refused because every tracked key was in use (maxKeys), since the start. */
  keysFull = 0
  /** Units asked of the coordinator (`decide`, `check`), and of those admitted there, since the start. */
  remoteAsks = 0
  remoteAdmitted = 0
  /**
   * Whether checks here go through `decide` (`check`, the HTTP edge, `acquire`): said in the
   * family's report, so in a crowded family the coordinator's own part holds this process's
   * default share and decides what it asks (default-holders.ts). Set by the first `decide`.
   */
  #decides = false

  constructor(
    prefix: string,
    options: ResolvedKeyedOptions,
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
    this.#maxKeys = options.maxKeys
    this.#maxKeysPerReport = options.maxKeysPerReport
    this.#shares = new FamilyShares(hotClock)
    this.#edgeWaits = new NextLeaseWaits(clock, maxNextLeaseWaits)
    this.#riseWaits = new NextLeaseWaits(clock, maxNextLeaseWaits)
    // The rise did not come in time: `ready()` resolves on the lease of 0, and what waited is
    // decided now (asked of the coordinator, or refused, as at once before).
    this.#rise = new RiseWait(clock, () => {
      for (const w of this.#readyWaiters.splice(0)) w.resolve()
      this.#riseWaits.wake(() => false)
    })
    this.#keyLeaseWaits = new KeyLeaseWaits(clock, maxKeyLeaseWaits)
    this.#reportStartMs = clock.now()
    this.#usage = new DemandMeter(clock.now())
    this.#madeAtMs = clock.now()
  }

  /** `leased` while a family lease is in force, `lapsed` on its fallback, `none` before any or after. */
  get mode(): 'leased' | 'lapsed' | 'none' {
    return this.#shares.lease !== undefined ? 'leased' : this.#shares.share > 0 ? 'lapsed' : 'none'
  }

  /** The family lease in force (its `capacity` is the default share, a fraction of every key). */
  get lease(): LeaseGrant | undefined {
    return this.#shares.lease
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
    const shares = this.#shares
    return shares.traits.perWindow
      ? Math.max(1, Math.round(shares.windowLengthMs / 1000))
      : undefined
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
    // Never ahead of a caller already waiting for the key (FIFO, as a named resource). The state
    // was just refreshed (#state): taken from at once.
    if (state.waiters === undefined && this.#keyKind.take(this.#shares, state, cost)) {
      this.#usage.admitted(cost)
      return true
    }
    this.#usage.refused(cost)
    return this.#refuse(state, cost)
  }

  /**
   * Takes `cost` of `key` here if this process's part of it allows (as `tryAcquire`); when it
   * holds nothing of the key, or the family is crowded (below), asks the coordinator, which decides against what it holds of the key, as one
   * central limiter would (a remote decision: one round trip, asks batched per connection).
   * Resolves true when admitted either way; false when refused, or when no connection is up
   * (never rejects but for a key the protocol cannot carry). Rate and quota families; a
   * concurrency family decides here only (a slot must be released where it was taken).
   */
  async check(key: string, cost = 1): Promise<boolean> {
    const decided = this.decide(key, cost)
    return typeof decided === 'boolean' ? decided : (await decided).admitted
  }

  /**
   * `check`, synchronous when decided here (the HTTP edge's path: no promise unless the
   * coordinator is asked): true or false, or the coordinator's answer to come.
   *
   * The coordinator is asked when this process holds nothing of the key (a key hot elsewhere,
   * or no default share past `maxDefaultHolders`), or when the family is crowded (its default
   * share here is under a fifth: a key's burst split over more than five processes), or a
   * keyed quota's part here is spent (its budget may be elsewhere; refused there too, the key is
   * not asked again for a refresh period). With a few processes, a rate family's refusal here
   * stands, as `tryAcquire`'s: measured (npm run bench --
   * efficiency), asking there too cost 1.5 points at 3 gateways and gained nothing; at 30 and
   * 100 it is what admits. A process holding a part counts a remote ask as its demand (it is
   * leased more); one holding none does not: the coordinator's part counts it, so a key asked
   * for thinly at many processes moves to the coordinator's part whole.
   */
  decide(key: string, cost = 1): boolean | Promise<RemoteAnswer> {
    return this.#decide(key, cost, true, true)
  }

  /**
   * `decide`; `mayWait`: at a quota window's edge, a check waits for the next window; while a
   * share rises to this process, for that share.
   */
  #decide(
    key: string,
    cost: number,
    mayWait: boolean,
    mayWaitKey: boolean,
  ): boolean | Promise<RemoteAnswer> {
    // The first says so in an early report: crowded, the coordinator's part then decides for
    // this process from the next round, not a refresh period later.
    if (!this.#decides) this.#startDeciding()
    const state = this.#state(key)
    if (state === undefined) return false
    // Admitted here: tryAcquire's path exactly (no look at the part, nothing allocated).
    if (state.waiters === undefined && this.#keyKind.take(this.#shares, state, cost)) {
      state.asked += cost
      this.#familyAsked += cost
      this.#usage.admitted(cost)
      return true
    }
    // At a quota window's edge (over here by time, the next window's lease a round trip away,
    // with the coordinator's round at the edge), the check waits for that lease and is decided
    // then, rather than refused for a budget nobody spent (#41: ±5 ms around every edge).
    // Not while no connection is up (a coordinator down across the edge): refused at once.
    if (
      mayWait &&
      !this.#closed &&
      this.#owner.connected !== false &&
      this.#edgeWaits.hasRoom &&
      this.#keyKind.lapsed(this.#shares, state)
    )
      return this.#edgeWaits.wait(quotaHorizonMs(this.#shares.refreshMs), () =>
        this.#decideAfterWait(key, cost),
      )
    const holdsPart = this.#keyKind.leaseOf(this.#shares, key, state).capacity > 0
    // This process holds nothing of the key while its share rises (a lease of 0 saying so): the
    // check waits for that share, then is decided as any, rather than refused here or asked of
    // the coordinator's part, which holds nothing of a family that is not crowded.
    if (mayWait && !holdsPart && this.#rise.pending && !this.#closed && this.#riseWaits.hasRoom)
      return this.#riseWaits.wait(this.#rise.leftMs, () => this.#decideAfterWait(key, cost))
    // A rate key that may be moving here: the check waits for the key's next lease (`#keyMoveWaitMs`).
    if (mayWaitKey && !this.#closed) {
      const waitMs = this.#keyMoveWaitMs(state, mayWait)
      const waiting = waitMs > 0 ? this.#keyLeaseWaits.wait(key, waitMs) : undefined
      if (waiting !== undefined) {
        // Demand while it waits, as a caller waiting in `acquire` is (`takeReport`). On the
        // default share, the key is asked for at once: an early report, now.
        state.keyWaiting += cost
        const first = state.lease === undefined
        if (first) {
          this.#earlyReportWish = true
          this.#owner.requestEarlyReport(true)
        }
        return waiting.then(() => {
          state.keyWaiting -= cost
          return this.#decideAfterWait(key, cost, first)
        })
      }
    }
    // Not asked (few processes, a part that refused): tryAcquire's refusal.
    if (!this.#asksRemote(key, state)) {
      state.asked += cost
      this.#familyAsked += cost
      this.#usage.refused(cost)
      return this.#refuse(state, cost)
    }
    if (holdsPart) {
      state.asked += cost
      this.#familyAsked += cost
    }
    this.remoteAsks += cost
    return this.#owner.askRemote!(keyIdOf(this.prefix, key), cost).then((answer) => {
      if (answer.admitted) {
        this.remoteAdmitted += cost
        return answer
      }
      // Refused there too: a part asks for more, as a refusal here would.
      if (holdsPart) this.#refuse(state, cost)
      if (!this.#keyKind.asksWhenSpent) return answer
      if (answer.retryAfterMs >= 0)
        state.askNotBeforeMs =
          this.#hotClock.now() + Math.min(answer.retryAfterMs, this.#shares.refreshMs)
      // This process's part is spent until its window's end: the caller is told that (as a
      // central counter would), not the coordinator's part's wait for a lease of the key.
      if (!holdsPart) return answer
      const hereMs = this.msUntil(key, cost)
      return hereMs > answer.retryAfterMs ? { ...answer, retryAfterMs: hereMs } : answer
    })
  }

  /**
   * A check that waited for the next family lease (a window's edge, a rise) or the key's, decided
   * now; `mayWaitKey`: it may wait once more, for a rise the key's first lease says is coming.
   */
  #decideAfterWait(
    key: string,
    cost: number,
    mayWaitKey = false,
  ): RemoteAnswer | Promise<RemoteAnswer> {
    if (this.#closed) return notAnswered
    const decided = this.#decide(key, cost, false, mayWaitKey)
    if (typeof decided !== 'boolean') return decided
    return decided
      ? { admitted: true, retryAfterMs: 0, window: this.leaseOf(key).window }
      : { admitted: false, retryAfterMs: this.msUntil(key, cost) }
  }

  /**
   * How long a check of `key` its part here cannot decide may wait for the key's next lease, ms
   * (0: not at all). A rate family's key, with few processes (crowded, the coordinator's part
   * holds the keys and decides): on the default share, others holding parts of it, for its
   * first own lease (`first`: the check's first wait), which the coordinator sends as the key
   * goes hot, saying whether a rise is coming (`keyMoveFirstWaitMs`); leased on its own and told
   * a rise is coming (`rising`), for that rise (`risingWaitMs` from the lease that said so, or
   * `keyMoveFirstWaitMs` when that was the key's first own lease, at most).
   */
  #keyMoveWaitMs(state: KeyState, first: boolean): number {
    if (!this.#keyKind.refills || this.#shares.lease === undefined || !this.#mayAskRemote())
      return 0
    if (this.#owner.connected === false || this.#shares.share < crowdedShare) return 0
    // On the default share: only where others hold parts of the key (not the whole here).
    if (state.lease === undefined)
      return first && this.#shares.share < 1 - 1e-9 && this.#hotClock.now() >= state.quietUntilMs
        ? keyMoveFirstWaitMs
        : 0
    return Math.max(0, state.risingUntilMs - this.#clock.now())
  }

  /**
   * Whether checks of a key wait here for its lease in a burst: half its part's burst here or
   * more (a customer's requests at once at this gateway). Then its report says `waits`, and the
   * other holders are asked to say at once whether they ever asked for the key, so that it can
   * move here whole. Not for a check or two (behind a random balancer, a key refused at one
   * gateway is soon asked at the others, and a holder cut at once refused its first check of it:
   * first checks at a gateway under 5 s old 100% -> 99.6% of the central limiter's in "home").
   */
  #burstWaits(state: KeyState): boolean {
    if (state.keyWaiting <= 0) return false
    return state.keyWaiting >= this.#keyKind.leaseOf(this.#shares, state.key, state).burst / 2
  }

  /** Whether the family's quota window is over here by time, the next one's lease not come. */
  #atEdge(): boolean {
    const nowMs = this.#hotClock.now()
    // The next window's share sent ahead is in force from its start (its keys see it lazily).
    this.#shares.advance(nowMs)
    const endAtMs = this.#shares.windowEndAtMs
    return endAtMs > 0 && nowMs >= endAtMs
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
    // A key this process's part cannot decide (decide's rule) is asked of the coordinator
    // first; refused there, it waits here as any, for what is left of maxWaitMs.
    if (this.#asksRemote(key, state)) {
      if (options.signal?.aborted === true)
        return Promise.reject(new SluiceError('SLUICE_ERR_CLIENT_ABORTED', what))
      const startMs = this.#clock.now()
      const decided = this.decide(key, cost)
      if (decided === true) return Promise.resolve(noPermit)
      if (decided !== false)
        return this.#answerWithin(decided, options, what).then((answer) => {
          if (answer.admitted) return noPermit
          const maxWaitMs = options.maxWaitMs
          return this.#wait(key, cost, {
            ...options,
            maxWaitMs:
              maxWaitMs === undefined
                ? undefined
                : Math.max(0, maxWaitMs - (this.#clock.now() - startMs)),
          })
        })
    }
    return this.#wait(key, cost, options)
  }

  /**
   * The coordinator's answer to an acquire's ask, within the caller's `maxWaitMs` and `signal`
   * (an answer may wait: for a key's lease at the coordinator, 500 ms at most, or for a
   * connection, `reconnectWaitMs`): rejected as a wait here would be, SLUICE_ERR_CLIENT_TIMEOUT
   * or SLUICE_ERR_CLIENT_ABORTED. An answer admitting it after that is a unit spent for nothing
   * (never one too many).
   */
  #answerWithin(
    answer: Promise<RemoteAnswer>,
    options: { maxWaitMs?: number | undefined; signal?: AbortSignal | undefined },
    what: string,
  ): Promise<RemoteAnswer> {
    const { maxWaitMs, signal } = options
    if (maxWaitMs === undefined && signal === undefined) return answer
    return new Promise<RemoteAnswer>((resolve, reject) => {
      const timer =
        maxWaitMs === undefined
          ? undefined
          : this.#clock.setTimeout(
              () =>
                end(
                  new SluiceError('SLUICE_ERR_CLIENT_TIMEOUT', `${what}: waited ${maxWaitMs} ms`),
                ),
              maxWaitMs,
            )
      const onAbort = (): void => end(new SluiceError('SLUICE_ERR_CLIENT_ABORTED', what))
      signal?.addEventListener('abort', onAbort, { once: true })
      let done = false
      const end = (error: SluiceError | undefined, value?: RemoteAnswer): void => {
        if (done) return
        done = true
        timer?.cancel()
        signal?.removeEventListener('abort', onAbort)
        if (error === undefined) resolve(value!)
        else reject(error)
      }
      answer.then(
        (value) => end(undefined, value),
        (error: unknown) =>
          end(
            error instanceof SluiceError
              ? error
              : new SluiceError('SLUICE_ERR_CLIENT_CLOSED', `${what}: ${String(error)}`),
          ),
      )
    })
  }

  /** `acquire` here: taken at once if the key allows, else queued behind its waiters. */
  #wait(
    key: string,
    cost: number,
    options: { maxWaitMs?: number | undefined; signal?: AbortSignal | undefined },
  ): Promise<Permit> {
    if (this.#closed)
      return Promise.reject(new SluiceError('SLUICE_ERR_CLIENT_CLOSED', this.familyId))
    const what = keyIdOf(this.prefix, key)
    const state = this.#state(key)
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

  /**
   * Whether `key` is a keyed quota's this process holds nothing of and has no lease of its own
   * (its default share here is none): one the coordinator may lease it from what no process
   * holds, once asked (a refusal asks, in an early report). The coordinator's part waits for that
   * lease before it refuses a remote check (`waitForKeyLease`).
   */
  awaitsOwnLease(key: string): boolean {
    if (this.#closed || this.#shares.kind !== 'quota') return false
    const state = this.#keys.get(key)
    if (state === undefined || state.lease !== undefined) return false
    if (this.#keyKind.lapsed(this.#shares, state)) return false
    return this.#keyKind.leaseOf(this.#shares, key, state).capacity <= 0
  }

  /**
   * Whether this family, made here less than `withinMs` ago, never held a share and holds
   * nothing of `key`: the coordinator's part just made by a first remote ask, whose first share
   * is a report and a round away. A crowded family's gateways starting together asked it for
   * every first check, refused for its first 120 ms (30 gateways: 65 asks, a central limiter
   * would have admitted them all). It waits for that share (`waitForKeyLease`, woken by it).
   */
  awaitsFirstShare(key: string, withinMs: number): boolean {
    if (this.#closed || this.#everHeld || this.#clock.now() - this.#madeAtMs >= withinMs)
      return false
    return this.leaseOf(key).capacity <= 0
  }

  /**
   * Resolves at `key`'s next own lease here, or the family's first share (`awaitsFirstShare`),
   * or in `maxWaitMs`, or at the close; undefined when too many checks wait already (10,000).
   * For the coordinator's part: see `awaitsOwnLease`.
   */
  waitForKeyLease(key: string, maxWaitMs: number): Promise<void> | undefined {
    if (this.#closed) return undefined
    const waiting = this.#keyLeaseWaits.wait(key, maxWaitMs)
    // Asked for at once (an early report), not at the next period's: a refusal alone asks for
    // a report that says nothing of a family (`takeEarlyReportWish`), so the key waited for
    // the period (0.4 s measured, and past `maxWaitMs` as often as not with a longer period).
    if (waiting !== undefined) {
      this.#earlyReportWish = true
      this.#owner.requestEarlyReport()
    }
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

  /** The key's cursor as a shared limit (see KeyView), moved to `key`. */
  view(key: string): KeyView {
    this.#view.key = key
    return this.#view
  }

  /** Milliseconds until `cost` of `key` would be admitted here (Infinity: not by waiting). */
  msUntil(key: string, cost = 1): number {
    const state = this.#keys.get(key)
    // A key not tracked yet starts with what its share holds of the burst: at once, or never
    // by waiting here (its bucket is made on its first check).
    if (state === undefined) return this.#untracked(key) >= cost ? 0 : Infinity
    this.#refreshIfStale(state)
    return this.#keyKind.msUntil(this.#shares, state, cost)
  }

  /** Whole tokens (or slots, or a quota's units) of `key` available here now. */
  remaining(key: string): number {
    const state = this.#keys.get(key)
    if (state === undefined) return Math.floor(this.#untracked(key))
    this.#refreshIfStale(state)
    return this.#keyKind.remaining(this.#shares, state)
  }

  /**
   * What `key` has left across the cluster, as well as this process knows it (the HTTP edge's
   * remaining): its part here plus what its last lease said the key had left at the other
   * processes (a keyed quota's key leased on its own: what the holders reported, less what this
   * process may still spend); otherwise its part here scaled to the whole key, as if every
   * other part were spent as this one is (a balancer spreads a key's requests as its shares
   * are spread). Never more than the key's limit; the others' spending since their last report
   * is not in it (docs/http.md: how exact).
   */
  clusterRemaining(key: string): number {
    const kind = this.#keyKind
    const limits = this.limitOf(key)
    const whole = kind.refills ? limits.burst : limits.capacity
    const state = this.#keys.get(key)
    let here: number
    let part: number
    if (state === undefined) {
      here = Math.floor(this.#untracked(key))
      part = this.leaseOf(key).burst
    } else {
      // One look-up, no object made: a response's headers ask this of every keyed request.
      this.#refreshIfStale(state)
      here = kind.remaining(this.#shares, state)
      const elsewhere = kind.elsewhere(this.#shares, state)
      if (elsewhere !== undefined) return Math.min(whole, here + elsewhere)
      part = kind.refills ? state.bucket.burst : state.slots
    }
    if (!(part > 0) || !(whole > 0)) return here
    return Math.min(whole, Math.floor((here * whole) / part + 1e-9))
  }

  /** What a key not tracked yet would start with (its kind says), less a quota's charge. */
  #untracked(key: string): number {
    const shares = this.#shares
    return Math.max(
      0,
      this.#keyKind.untracked(shares, key) - shares.chargeOf(key, shares.windowIndex),
    )
  }

  /** Milliseconds until `key`'s bucket is full again here (0 for slots; a quota's: the window's end). */
  msUntilFull(key: string): number {
    const state = this.#keys.get(key)
    if (state !== undefined) this.#refreshIfStale(state)
    return this.#keyKind.msUntilFull(this.#shares, state)
  }

  /**
   * A keyed quota's units of `key` counted spent here, into `out` (nothing allocated): what was
   * admitted (and what a share handed on here counts spent) in the window of its budget, and of
   * the next window spent ahead. For the coordinator's own part, which writes what it spent
   * before it answers (server/coordinator/spend-reserve.ts).
   */
  spentOf(key: string, out: KeySpent): KeySpent {
    const state = this.#keys.get(key)
    out.window = state?.usedWindow ?? Number.NaN
    out.used = state?.used ?? 0
    out.nextWindow = state?.nextUsedWindow ?? -1
    out.nextUsed = state?.nextUsed ?? 0
    return out
  }

  /** What this process may use of `key` now. */
  leaseOf(key: string): KeyLease {
    return this.#keyKind.leaseOf(this.#shares, key, this.#keys.get(key))
  }

  /** The capacity a key is configured with (the plan's, else the family's): what callers are held to. */
  limitOf(key: string): { capacity: number; burst: number } {
    return this.#shares.keyLimits(key)
  }

  /**
   * Resolves at the first family lease (not at a lease of 0 that says a share is rising to
   * this process: at that share, or `risingWaitMs` after it, client/rise.ts); rejects when the
   * coordinator refuses the family or the client stops.
   */
  ready(options: { timeoutMs?: number | undefined } = {}): Promise<void> {
    if (this.#shares.lease !== undefined && !this.#rise.pending) return Promise.resolve()
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
    this.#expiry?.cancel()
    this.#hold?.cancel()
    this.#hold = undefined
    const before = this.mode
    // Whether this family held any share before this lease (a handover goes only to one that
    // never did).
    const heldBefore = this.#everHeld
    if (grant.capacity > 0) this.#everHeld = true
    // Its first share, or a rise: the checks waiting for it (the coordinator's part's, asked while
    // the pool meant it to hold more) are decided, after the rest of the batch.
    const heldShare = heldBefore && this.#shares.lease !== undefined ? this.#shares.share : 0
    if (grant.capacity > heldShare) this.#keyLeaseWaits.wakeAll()
    // A fall a joiner waits for (`handOn`): what the part that fell holds is given up for it.
    const handOn =
      grant.handOn === true &&
      this.#shares.kind === 'rate' &&
      family.kind === 'rate' &&
      this.#shares.lease !== undefined &&
      grant.capacity < this.#shares.share
    const beforeFall = handOn ? this.#beforeFall() : undefined
    const hotNow = this.#hotClock.now()
    this.#priorShare.atMs = hotNow
    this.#priorShare.earned = this.#shares.share > 0 ? this.#shares.earnedShare(hotNow) : 0
    if (!heldBefore && grant.capacity > 0) this.#forgetEmpty(family.kind)
    const changed = this.#shares.applyLease(grant, family)
    this.#keyKind = keyKinds[this.#shares.kind]
    if (grant.inherit !== undefined) this.#inherit(grant.inherit)
    // A new share takes effect on every key now, not at each key's next use: a bucket must not
    // go on earning at the old rate after the ack says the new one is in force.
    if (changed) this.#refreshDefaults()
    this.#fallHeld = beforeFall === undefined ? undefined : this.#giveFallen(beforeFall)
    if (grant.handed !== undefined) this.#takeHanded(grant.handed, heldBefore)
    this.#expiry = this.#clock.setTimeout(() => this.#lapse(grant), grant.ttlMs).unref()
    this.#refusedError = undefined
    if (before !== 'leased') this.emit('mode', 'leased')
    this.emit('lease', grant)
    if (!this.#rise.note(grant)) for (const w of this.#readyWaiters.splice(0)) w.resolve()
    if (this.#waiting.size > 0) this.#serveAll()
    this.#edgeWaits.wake(() => this.#atEdge())
    this.#riseWaits.wake(() => this.#rise.pending)
    return this.fits()
  }

  /** A key's own lease: it rules this key here until the key goes cold (`toDefault`). */
  applyKeyLease(key: string, grant: LeaseGrant): boolean {
    if (this.#closed) return true
    if (grant.toDefault === true) return this.#toDefault(key)
    // A key's lease may come before any family lease (the key went hot as this process joined):
    // it says the kind, so a quota's budget is never taken for a bucket's rate.
    if (this.#shares.setKind(grant.kind)) this.#keyKind = keyKinds[grant.kind]
    let state = this.#keys.get(key)
    // Tokens a key first seen with this lease starts with, when fewer than its new bucket's.
    let startWith = Infinity
    if (state === undefined) {
      // Leased without asking (it went hot elsewhere): tracked whatever the bound, since
      // forgetting it would bring back the default share here.
      state = this.#keyKind.newState(this.#shares, key)
      this.#keys.set(key, state)
      if (this.#keyKind.refills) {
        // A lease of nothing for a key this process never held (it was hot before this process
        // joined): no default share of it was ever this process's, whatever a new key of the
        // default split starts with here (a first share may start full), so it starts empty.
        // A key's lease in the batch of a family lease (a joiner's, or one again on a new
        // connection) continues what the default share held of it before that lease: what the
        // family lease starts its keys with (`full`, `fill`, a rise) is the default split's,
        // and this key was not on it. Found by the family model: a holder whose share had
        // lapsed while the coordinator restarted came back with a full first share and its
        // seeded lease of a hot key, and held 12 tokens of the key where the key's central
        // bucket held 9.
        const prior = this.#priorShare
        if (grant.capacity === 0) startWith = 0
        else if (prior.atMs === this.#hotClock.now())
          startWith = prior.earned * this.#shares.keyLimits(key).burst
        if (state.bucket.tokens > startWith) state.bucket.setRate(0, 0)
        else startWith = Infinity
      }
    }
    // What the key may use changed since it was last used (a lease's end, the default share's
    // moves): the bucket moves as of then, before this lease moves it now.
    if (this.#keyKind.refills) this.#refreshIfStale(state)
    // A key's share handed on from a process closed cleanly (server/pool/held-handover.ts):
    // what it earned since the release, taken only by a bucket that held nothing of the key
    // (no lease of it, no token, no excess). It starts as one fresh part holding that.
    const handFill =
      grant.fill !== undefined &&
      grant.capacity > 0 &&
      this.#keyKind.refills &&
      !((state.lease?.capacity ?? 0) > 0) &&
      state.bucket.tokens === 0 &&
      state.bucket.excess === 0
    if (handFill) state.bucket.setRate(0, 0)
    // A move of the key's own lease from one lease to another (not from a fallback or the
    // default split, which the coordinator does not count as held tokens): a fall made for a
    // process waiting for its first part of the key (`handOn`) gives up what the slices that
    // fell held, for its ack to say (`takeGave`), and a rise holds what the falls it was granted
    // for gave up (`fill`), as a named rate's lease does (client/enforcer.ts).
    const before = this.#keyKind.refills
      ? this.#keyKind.leaseOf(this.#shares, key, state)
      : undefined
    const moved =
      before !== undefined && before.source === 'key' && !handFill && grant.full !== true
    const fallsPlain =
      moved &&
      grant.handOn === true &&
      grant.capacity < before.capacity &&
      state.bucket.partCount === 1 &&
      state.bucket.excess === 0
    // A rise holding a gift: a fresh part, empty, and the gift an excess going at the rate gained
    // (TokenBucket.holdGift), moved here before `refresh` would move it without.
    if (moved && grant.capacity > before.capacity && (grant.fill ?? 0) > 0) {
      state.bucket.moveRate(grant.capacity, grant.burst)
      state.bucket.holdGift(
        grant.fill!,
        grant.burst - before.burst,
        grant.capacity - before.capacity,
      )
    }
    const nowMs = this.#hotClock.now()
    // A key leased here for the first time (it went hot, maybe elsewhere): the coordinator keeps
    // this process's seeded lease until it hears what was spent of the key (a quota's,
    // server/pool/shapes/named-quota.ts) or asked of it (a rate or concurrency key's,
    // shapes/hot-key.ts). A quota's key is reported after the usual delay, with what it spent
    // (its unasked holders keep a unit each). A rate or concurrency key never asked for here (in
    // a family here for three refresh periods and more) says so at once, right behind the
    // batch's ack: its seed then falls (to 0 where one holder alone asks, giving up what it held:
    // the key moves whole there, #41) a round trip after the key went hot, not a refresh period
    // later. A key asked for here is reported at the next period's report, with its asking over
    // the period, as before: said at once, its asking over the few ms since the last report said
    // little of it, and the key, taken from where it was asked, was refused there ("100 per
    // minute", 3 gateways: 99.1% of the central limiter went to 87.6%); asked not for three
    // periods, it was most often asked again soon (behind a random balancer, a key asked a few
    // times a second over six gateways: "a 6th joins" went from 98.4% to 71.9%). Nor does a
    // process younger than that: it has no past to judge by (a replacement handed its
    // predecessor's share of the key gave it up at once, test/client/keyed.test.ts). Nor a seed
    // of 0 (a crowded family's process that decides remotely): it holds nothing to keep.
    const firstOwn = state.lease === undefined && grant.toDefault !== true
    if (firstOwn) {
      const quota = grant.window !== undefined
      const atMs = this.#clock.now()
      const lately = 3 * this.#shares.refreshMs
      const unasked =
        !quota &&
        grant.reportNow === true &&
        grant.capacity > 0 &&
        state.asked === 0 &&
        state.askedAtMs === -Infinity &&
        atMs - this.#madeAtMs > lately
      if (quota || unasked) {
        state.mustReport = true
        this.#earlyReportWish = true
        this.#owner.requestEarlyReport(unasked)
      }
    }
    // Its block of the next window starts no sooner than placed from the real time (the hot
    // clock's reading lags it): its times are counted from the reading (quota-keys.ts).
    const next = grant.window?.next
    const lagMs = next === undefined ? 0 : Math.ceil(preciseNow(this.#hotClock) - nowMs)
    state.lease =
      lagMs > 0
        ? {
            ...grant,
            window: { ...grant.window!, next: { ...next!, startsInMs: next!.startsInMs + lagMs } },
          }
        : grant
    state.leaseProof = grant.proof
    state.leaseUntilMs = nowMs + grant.ttlMs
    state.fallbackUntilMs = state.leaseUntilMs + grant.safeHoldMs
    state.epoch = -1
    this.#keyKind.refresh(this.#shares, state)
    // A rate key reset (server/pool/reset.ts): its bucket is full again, once, at this lease's burst.
    if (grant.full === true && this.#keyKind.refills) state.bucket.fill()
    // A share handed on whole (`fillWhole`): the leaver's tokens, as its bucket held them.
    else if (handFill && grant.fillWhole === true)
      state.bucket.refund(Math.min(grant.fill!, state.bucket.burst))
    else if (handFill) state.bucket.holdGift(grant.fill!, state.bucket.burst, grant.capacity)
    else if (startWith > 0 && startWith < Infinity) state.bucket.refund(startWith)
    if (fallsPlain) {
      const gave = state.bucket.dropExcess()
      if (gave > 0) {
        const id = keyIdOf(this.prefix, key)
        this.#keyGave ??= new Map()
        this.#keyGave.set(id, (this.#keyGave.get(id) ?? 0) + gave)
      }
    }
    if (state.waiters !== undefined) this.#serve(state)
    // A rise on its way (`rising`): waited for from the first lease that says so, at most
    // `risingWaitMs`, or `keyMoveFirstWaitMs` when that is the key's first own lease (its seed:
    // the key's first round is to come, and with it the other holders' word); any lease that
    // does not say so ends the wait.
    const wasRising = state.risingUntilMs > 0
    if (grant.rising !== true) state.risingUntilMs = 0
    else if (!wasRising)
      state.risingUntilMs = this.#clock.now() + (firstOwn ? keyMoveFirstWaitMs : risingWaitMs)
    // A lease of more than nothing: a first of 0 is often followed by a rise at the key's round.
    // And one that ends a rise's wait, whatever it holds.
    if (grant.capacity > 0 || (wasRising && grant.rising !== true)) this.#keyLeaseWaits.wake(key)
    // In force once what this process holds (slots) or spent (a quota) of the key fits it.
    return this.#keyKind.fits(state)
  }

  /** Whether every key's slots in use fit what the family and key leases now allow (a decrease may be acknowledged). */
  fits(): boolean {
    // Only slots are held past a decrease; a keyed quota's share is never cut within a window.
    if (!this.#shares.traits.holdsInFlight) return true
    for (const state of this.#keys.values()) {
      this.#keyKind.refresh(this.#shares, state)
      if (!this.#keyKind.fits(state)) return false
    }
    return true
  }

  /** Whether the key's slots in use (or a quota's units spent) fit its limit now. */
  keyFits(key: string): boolean {
    const state = this.#keys.get(key)
    if (state === undefined) return true
    this.#keyKind.refresh(this.#shares, state)
    return this.#keyKind.fits(state)
  }

  /**
   * The entries of a demand report: the family (its traffic, so the
   * coordinator knows who uses it most), the keys this process holds a lease
   * of and asks for, and up to `maxKeysPerReport` keys whose demand passed
   * the default share, most wanted first. Starts a new period. A keyed
   * quota's leased keys say what they used of their window's budget.
   */
  takeReport(): KeyReport[] {
    const nowMs = this.#clock.now()
    const elapsedSec = Math.max(0.001, (nowMs - this.#reportStartMs) / 1000)
    this.#reportStartMs = nowMs
    const hotNow = this.#hotClock.now()
    const shares = this.#shares
    const kind = this.#keyKind
    let waitingAll = 0
    let inFlightAll = 0
    for (const state of this.#waiting) waitingAll += state.waiters?.length ?? 0
    if (shares.traits.holdsInFlight)
      for (const state of this.#keys.values()) inFlightAll += state.inFlight
    const out: KeyReport[] = [
      {
        resource: this.familyId,
        wants: this.#familyAsked / elapsedSec,
        ...(this.weight === undefined ? {} : { weight: this.weight }),
        // It asks the coordinator what its part cannot decide: crowded, it may hold no default.
        ...(this.#decides && this.#mayAskRemote() ? { remote: true } : {}),
        // What every key admitted and refused here, together: the family's figures in the
        // coordinator's views and metrics (never a series per key).
        usage: this.#usage.takeUsage(
          nowMs,
          waitingAll,
          shares.traits.holdsInFlight ? inFlightAll : undefined,
        ),
      },
    ]
    this.#familyAsked = 0
    const candidates: { state: KeyState; wants: number }[] = []
    for (const state of this.#keys.values()) {
      // Callers waiting in acquire are demand too, every period they wait (as a named resource's),
      // and checks waiting for the key's next lease (`#keyMoveWaitMs`).
      const waiting = (state.waiters?.totalCost() ?? 0) + state.keyWaiting
      const wants = kind.wants(state, elapsedSec, waiting)
      const refused = state.refused + waiting
      state.asked = 0
      state.refused = 0
      state.peak = state.inFlight
      if (wants > 0) state.askedAtMs = nowMs
      // A key on the default share (no lease of its own: most of them) makes no id and asks no
      // kind: every kind says such a key is not leased.
      if (state.lease !== undefined) {
        const lately = state.lease.capacity > 0 && nowMs - state.askedAtMs <= 3 * shares.refreshMs
        const id = keyIdOf(this.prefix, state.key)
        const leased = kind.leasedEntry(shares, state, id, wants, lately)
        if (leased.leased) {
          if (leased.entry !== undefined) out.push(leased.entry)
          continue
        }
      }
      if (hotNow < state.quietUntilMs) continue
      this.#refreshIfStale(state)
      if (kind.wantsOwnLease(shares, state, state.key, wants, refused))
        candidates.push({ state, wants })
    }
    candidates.sort((a, b) => b.wants - a.wants)
    for (const c of candidates.slice(0, this.#maxKeysPerReport)) {
      const entry = kind.candidateEntry(shares, c.state, keyIdOf(this.prefix, c.state.key), c.wants)
      out.push(this.#burstWaits(c.state) ? { ...entry, waits: true } : entry)
    }
    return out
  }

  // ---- as a Holder (holder.ts): what the client asks of it ----

  get holderId(): string {
    return this.familyId
  }

  /** The family's own lease, or one of a key of it. */
  holds(resourceId: string): boolean {
    return resourceId === this.familyId || keyOfId(this.prefix, resourceId) !== undefined
  }

  helloHoldings(): HelloHolding[] {
    return this.holdings()
  }

  reportEntries(): KeyReport[] {
    return this.takeReport()
  }

  takeEarlyReportWish(): boolean {
    const wish = this.#earlyReportWish
    this.#earlyReportWish = false
    return wish
  }

  applyLeaseOf(resourceId: string, grant: LeaseGrant): boolean {
    return resourceId === this.familyId
      ? this.applyFamilyLease(grant)
      : this.applyKeyLease(keyOfId(this.prefix, resourceId)!, grant)
  }

  fitsFor(resourceId: string): boolean {
    return resourceId === this.familyId
      ? this.fits()
      : this.keyFits(keyOfId(this.prefix, resourceId)!)
  }

  /** A new connection: nothing to do (a family's leases say whether the coordinator learns). */
  connected(): void {}

  /** The coordinator will not lease `key` on its own now (too many hot keys): ask again later. */
  quietKey(key: string): void {
    const state = this.#keys.get(key)
    if (state !== undefined) state.quietUntilMs = this.#hotClock.now() + 10_000
  }

  /**
   * What a hello reports: the family lease and each key's own lease in force, for a learning
   * coordinator (and for a restored one to check its ledger against). A keyed quota's share and
   * key budgets whose window is over here are not held: nothing more can be spent of them, and
   * a coordinator restarted after the edge counts none of that window (claimed, they read as
   * leases its ledger does not know, and it learned for a whole window: test/faults/quota-edge).
   */
  holdings(): { resource: string; capacity: number; proof?: LeaseProof }[] {
    const out: { resource: string; capacity: number; proof?: LeaseProof }[] = []
    const shares = this.#shares
    const perWindow = shares.traits.perWindow
    const nowMs = this.#hotClock.now()
    if (shares.share > 0 && !(perWindow && this.#atEdge()))
      out.push({
        resource: this.familyId,
        capacity: shares.share,
        ...(shares.lease?.proof === undefined ? {} : { proof: shares.lease.proof }),
      })
    for (const state of this.#keys.values()) {
      if (state.lease === undefined) continue
      if (perWindow && nowMs >= state.leaseUntilMs) continue
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
    this.#shares.clear()
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
    this.#keyKind = closedKeys(this.#keyKind)
    this.#expiry?.cancel()
    this.#hold?.cancel()
    this.#wake?.cancel()
    for (const w of this.#readyWaiters.splice(0))
      w.reject(new SluiceError('SLUICE_ERR_CLIENT_CLOSED', this.familyId))
    this.#edgeWaits.answerAll(notAnswered)
    this.#rise.cancel()
    this.#riseWaits.answerAll(notAnswered)
    this.#keyLeaseWaits.settleAll()
    for (const state of this.#waiting) {
      state.waiters?.rejectAll('SLUICE_ERR_CLIENT_CLOSED', keyIdOf(this.prefix, state.key))
      state.waiters = undefined
    }
    this.#waiting.clear()
  }

  // ---- internals ----

  /**
   * Whether a check of `key` that may wait a round trip asks the coordinator (`decide`): a rate
   * or quota family, connected to an owner that can ask, and this process holding nothing of
   * the key, or the family crowded (its default share here under a fifth).
   */
  #asksRemote(key: string, state: KeyState): boolean {
    if (!this.#mayAskRemote()) return false
    // At a quota window's edge the coordinator's part has ended as well: nothing to ask of it.
    if (this.#keyKind.lapsed(this.#shares, state)) return false
    if (this.#keyKind.leaseOf(this.#shares, key, state).capacity <= 0) return true
    if (this.#shares.share < crowdedShare) return true
    // A quota's key spent here may have budget elsewhere (a quarter of every key held back for
    // one more holder, or a hot key's budget not yet leased out): asked there, as a central
    // counter would admit it, until the coordinator refuses it too (then once a period at most).
    return this.#keyKind.asksWhenSpent && this.#hotClock.now() >= state.askNotBeforeMs
  }

  #startDeciding(): void {
    this.#decides = true
    if (!this.#mayAskRemote()) return
    this.#earlyReportWish = true
    this.#owner.requestEarlyReport()
  }

  /** Whether the coordinator may be asked at all: a rate or quota family, an owner that can ask. */
  #mayAskRemote(): boolean {
    return (
      !this.#shares.traits.holdsInFlight && !this.#closed && this.#owner.askRemote !== undefined
    )
  }

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
      state = this.#keyKind.newState(this.#shares, key)
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

  /** Admits `cost` of the key if what it may use now allows (no metering: the caller's). */
  #take(state: KeyState, cost: number): boolean {
    this.#refreshIfStale(state)
    if (!this.#keyKind.take(this.#shares, state, cost)) return false
    this.#usage.admitted(cost)
    return true
  }

  /** What a caller admitted for `cost` of `key` holds: a slot's permit, or nothing to give back. */
  #permitFor(key: string, cost: number): Permit {
    return this.#shares.traits.holdsInFlight ? this.#permit(key, cost) : noPermit
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
    if (this.#waiting.size === 0 || !this.#keyKind.refills) return
    let soonestMs = Infinity
    for (const state of this.#waiting) {
      const head = state.waiters?.headCost()
      if (head === undefined) continue
      this.#refreshIfStale(state)
      soonestMs = Math.min(soonestMs, state.bucket.msUntil(head))
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
    this.#keyKind.refresh(this.#shares, state)
    if (state.waiters !== undefined) this.#serve(state)
    return true
  }

  /** Frees room for a new key: the least recently used key that holds nothing. */
  #evictOne(): boolean {
    for (let looked = 0; looked < 32; looked++) {
      let next = this.#evictCursor?.next()
      if (next === undefined || next.done === true) {
        // Around again, from the oldest key.
        this.#evictCursor = this.#keys.entries()
        next = this.#evictCursor.next()
        if (next.done === true) return false
      }
      const [key, state] = next.value
      this.#refreshIfStale(state)
      if (this.#keyKind.evictable(this.#shares, state)) {
        this.#keys.delete(key)
        return true
      }
    }
    return false
  }

  #refreshIfStale(state: KeyState): void {
    if (state.epoch !== this.#shares.epoch || this.#hotClock.now() >= state.changeAtMs)
      this.#keyKind.refresh(this.#shares, state)
  }

  #refuse(state: KeyState, cost: number): boolean {
    // A refusal by time alone (a quota's window's edge) asks nothing of the coordinator.
    if (this.#keyKind.lapsed(this.#shares, state)) return false
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

  /**
   * A keyed quota's share handed on to this process (server/pool/handover.ts) came with what
   * its leaver spent of these keys in the window: they count as spent here, as if this process
   * had spent them (a key seen later starts from its charge: quota-keys.ts).
   */
  #inherit(inherit: NonNullable<LeaseGrant['inherit']>): void {
    if (inherit.window !== this.#shares.windowIndex) return
    if (!this.#shares.charge(inherit.window, inherit.keys, inherit.id)) return
    for (const [key, units] of inherit.keys) {
      const state = this.#keys.get(key)
      if (state !== undefined && state.usedWindow === inherit.window) state.used += units
    }
  }

  /**
   * A rate family's share that another process released came with what it still held
   * (server/pool/held-handover.ts), once per handover, and only if this family never held a
   * share: a named key gets its tokens (never above its burst), a key never seen here starts
   * from `level` more (raiseBase). The tokens moved, they were not made: the leaver holds them
   * no more. A named key that cannot be tracked here (the key bound) gets nothing, and then
   * neither does a key never seen here, which would start from the raised level. So does a
   * joiner's first share take what the falls made for it gave up when its rise is theirs
   * (server/pool/fall-gifts.ts, paired); else the lease says `goesAtShare`, and the tokens are
   * an excess going at that rate.
   */
  #takeHanded(handed: NonNullable<LeaseGrant['handed']>, heldBefore: boolean): void {
    const shares = this.#shares
    if (shares.kind !== 'rate' || !shares.takeHanded(handed.id)) return
    // Only into buckets that never held anything (a new process): each key's bucket is then one
    // part, as the leaver's was for every key whose tokens it named; a bucket in parts, or with
    // a fall's excess going, would earn those tokens back faster than the leaver would have.
    if (heldBefore) return
    // A key tracked here and not named gets nothing: its bucket is one part, while the level
    // was the leaver's untracked keys', a full part and a part earning (a key never seen here
    // starts from the level in that shape: raiseBase).
    // An unpaired fall's gift (`goesAtShare`) is held above the burst, going as the faller's
    // excess would have: in a full part, it refilled where that excess would have gone, once
    // another share had risen into the falls' rate (BurstSlack's property, 100.029 of 100 at
    // seed 58248383).
    const goesAtShare = handed.goesAtShare
    let tracked = true
    for (const [key, tokens] of handed.keys) {
      let state: KeyState | undefined
      try {
        state = this.#state(key)
      } catch {
        state = undefined
      }
      if (state === undefined) tracked = false
      else if (state.lease !== undefined) continue
      else if (goesAtShare === undefined) state.bucket.refund(tokens)
      else state.bucket.addExcess(tokens, goesAtShare * shares.keyLimits(key).capacity)
    }
    if (!tracked) return
    if (goesAtShare === undefined) shares.raiseBase(handed.level)
    else shares.handGift(handed.level, goesAtShare)
  }

  /** Tokens the fall of key `resourceId`'s own lease just put in force gave up, for its ack, taken. */
  takeGave(resourceId: string): number {
    const gave = this.#keyGave?.get(resourceId)
    if (gave === undefined) return 0
    this.#keyGave!.delete(resourceId)
    return gave
  }

  /** What the fall of the family lease just put in force gave up (`handOn`), for its ack, taken. */
  takeFallHeld(resourceId: string): FallHeld | undefined {
    if (resourceId !== this.familyId) return undefined
    const held = this.#fallHeld
    this.#fallHeld = undefined
    return held
  }

  /**
   * Before a fall a joiner waits for: what a key never seen here holds of its burst, and which
   * tracked keys' buckets are plain (one part, no excess: only those give their tokens up, as
   * a release's, `heldAtClose`, says why).
   */
  #beforeFall(): FallBefore {
    const plain = new Set<KeyState>()
    for (const state of this.#keys.values()) {
      if (state.lease !== undefined) continue
      this.#refreshIfStale(state)
      if (state.bucket.partCount === 1 && state.bucket.excess === 0) plain.add(state)
    }
    return { level: this.#shares.untrackedLevel(), plain, share: this.#shares.share }
  }

  /**
   * The default share just fell for a joiner (`handOn`): what the part that fell held is given
   * up, as a release says it (`heldAtClose`), for the coordinator to hand to the joiner's first
   * share (server/pool/fall-gifts.ts). A key never seen here now starts from the new share (it
   * always did: `FamilyShares.applyLease`), so what it held above is given, going at the rate
   * that fell; a tracked key whose bucket was plain gives the fall's part of all it holds (its
   * excess, going at the rate that fell, then the rest from its part); one that held an excess already (a gift it took,
   * a fall's) gives the fall's part of its excess, with that part of the rate it goes at, and
   * keeps the rest going at the rest; so does a gift's level for keys never seen. A key leased
   * on its own is named with 0 (its lease is not the share). `goesAtShare` is the fastest any
   * of it goes at, as a share of each key's rate (each part no slower than it went here). Past
   * maxSpentKeys keys, the level is 0 and the keys giving most are named.
   */
  #giveFallen(before: FallBefore): FallHeld {
    const shares = this.#shares
    const fell = Math.max(0, before.share - shares.share)
    const part = before.share > 0 ? fell / before.share : 0
    let goesAtShare = fell
    const [giftLevel, giftGoes] = shares.splitGift(part)
    // A key never seen: the fall's excess and the gift's part, two excesses going together.
    if (giftLevel > 0) goesAtShare = Math.max(goesAtShare, fell + giftGoes)
    const level = Math.max(0, before.level - shares.untrackedLevel()) + giftLevel
    const held = this.#heldOf(level, (state) => {
      const plain = before.plain.has(state)
      const bucket = state.bucket
      const [tokens, goesPerSec] = bucket.splitExcess(plain ? 1 : part)
      const capacity = shares.keyLimits(state.key).capacity
      if (tokens > 0 && capacity > 0) goesAtShare = Math.max(goesAtShare, goesPerSec / capacity)
      if (!plain) return tokens
      // A plain bucket gives the slice that fell whole: `part` of all it held, what did not fit
      // the new burst (the excess, just given) and the rest from what did. The excess alone
      // gave nothing of a key below its new burst: the joiner started such a key empty while
      // the others held its tokens, and refused half its checks of it for tens of seconds
      // ("a 6th joins": keys of rank 10-29 at the joiner 48.6% of a central limiter).
      const more = part * (tokens + bucket.tokens) - tokens
      return more > 0 && bucket.tryTake(more) ? tokens + more : tokens
    })
    return goesAtShare > 0 ? { ...held, goesAtShare } : held
  }

  /**
   * What the default share holds (or gives up) as a release or an ack says it: of every key
   * not named, `level` of its burst; each key tracked here whose `tokensOf` is less, named with
   * it; a key leased on its own named with 0 (its lease is not the share). Past maxSpentKeys
   * keys, the level is 0 and the keys holding most are named.
   */
  #heldOf(level: number, tokensOf: (state: KeyState) => number): FallHeld {
    const shares = this.#shares
    let keys: [string, number][] = []
    for (const state of this.#keys.values()) {
      if (state.lease !== undefined) {
        keys.push([state.key, 0])
        continue
      }
      const tokens = tokensOf(state)
      if (tokens < level * shares.keyLimits(state.key).burst) keys.push([state.key, tokens])
    }
    if (keys.length > domainLimits.maxSpentKeys) {
      level = 0
      keys = keys
        .filter(([, tokens]) => tokens > 0)
        .sort((a, b) => b[1] - a[1])
        .slice(0, domainLimits.maxSpentKeys)
    }
    return { resource: this.familyId, level, keys }
  }

  /**
   * A rate family closing: what its default share still holds, for the release, so that the
   * coordinator may hand it on with the share (server/pool/held-handover.ts). `level` is what
   * a key never seen here would start with now (a share of its burst); each key tracked here
   * that holds less is named with its tokens, a key whose bucket is in parts or holds a fall's
   * excess with 0, and a key leased on its own with 0 (its lease is not the share).
   * Past maxSpentKeys keys, the level is 0 and the keys holding most are named.
   */
  heldAtClose(): FallHeld | undefined {
    const shares = this.#shares
    if (shares.kind !== 'rate' || shares.lease === undefined || !(shares.share > 0))
      return undefined
    return this.#heldOf(shares.untrackedLevel(), (state) => {
      this.#refreshIfStale(state)
      const bucket = state.bucket
      // Only a plain bucket's tokens go (one part, no excess): a bucket in parts earns each to
      // its own burst, and at the heir, in one part, they would earn faster (BurstSlack's
      // property found it: a full old part's rate earned at the heir).
      return bucket.partCount === 1 && bucket.excess === 0 ? bucket.tokens : 0
    })
  }

  /**
   * A keyed quota family closing: what this process spent of each key by its default share in
   * the window of its share (charges included), for the release, so that the coordinator may
   * hand the share on. Undefined when there is nothing to hand on (not a quota, no share of a
   * window) or too much to say (more than maxSpentKeys keys): the share then stays spent.
   */
  spentInWindow(): { resource: string; window: number; keys: [string, number][] } | undefined {
    const shares = this.#shares
    shares.advance(this.#hotClock.now())
    const window = shares.windowIndex
    if (shares.kind !== 'quota' || Number.isNaN(window)) return undefined
    // The share in force: its lease's, or sent ahead with it (the coordinator holds it as a
    // lease of its window once that window is in force there: server/pool/clients.ts, release).
    if (shares.lease?.window?.index !== window && !shares.aheadInForce) return undefined
    const keys: [string, number][] = []
    const seen = new Set<string>()
    for (const state of this.#keys.values()) {
      if (state.usedWindow !== window) continue
      seen.add(state.key)
      // A key leased on its own here is counted by its own lease, released beside the family.
      if (state.used > 0 && !keyLeaseRules(shares, state)) keys.push([state.key, state.used])
    }
    for (const [key, units] of shares.chargedIn(window))
      if (!seen.has(key) && units > 0) keys.push([key, units])
    return keys.length > domainLimits.maxSpentKeys
      ? undefined
      : { resource: this.familyId, window, keys }
  }

  /**
   * A keyed quota family closing: what this process used of each key leased on its own here,
   * in that lease's window, for the release (only that stays spent; the rest of each block
   * comes back).
   */
  keyLeasesUsed(): { resource: string; window: number; used: number; charged?: number }[] {
    const out: { resource: string; window: number; used: number; charged?: number }[] = []
    if (this.#shares.kind !== 'quota') return out
    for (const state of this.#keys.values()) {
      if (state.lease?.window === undefined || !keyLeaseRules(this.#shares, state)) continue
      // The window of the budget in force: the lease's, or its next one's sent ahead.
      this.#refreshIfStale(state)
      const window = state.window
      const used = state.usedWindow === window ? state.used : 0
      // Of it, what a share handed here brought (a key reset gives back only the rest).
      const charged = Math.min(used, chargedOf(this.#shares, state, window))
      out.push({
        resource: keyIdOf(this.prefix, state.key),
        window,
        used,
        ...(charged > 0 ? { charged } : {}),
      })
    }
    return out
  }

  /** Every key on the default share takes the share in force now. */
  #refreshDefaults(): void {
    for (const state of this.#keys.values())
      if (state.lease === undefined) this.#keyKind.refresh(this.#shares, state)
  }

  /**
   * A rate family's first share: each key tracked while it held none (checked while its share
   * rose, a lease of 0) is forgotten, so it starts as a key never seen, from what the share
   * starts with (`full`, `fill`, what the falls made for it gave up: `handed`), not as a bucket
   * that held nothing and earns from empty (a joiner's first checks of new keys, tracked as
   * they waited for the share, were refused: the central limiter admits them). Safe as that:
   * such a bucket is empty (a share of 0, and no lease of its own) and admitted nothing. Not a
   * key with a lease of its own, callers waiting or tokens; not a quota's (its use is counted).
   */
  #forgetEmpty(kind: string): void {
    if (kind !== 'rate' || this.#shares.kind !== 'rate') return
    for (const state of this.#keys.values())
      if (
        state.lease === undefined &&
        state.waiters === undefined &&
        state.inFlight === 0 &&
        state.bucket.tokens <= 0
      )
        this.#keys.delete(state.key)
  }

  /** The family lease ran out unrenewed: its fallback for the hold, then nothing. */
  #lapse(lease: LeaseGrant): void {
    this.#expiry = undefined
    this.#shares.lapse()
    this.#refreshDefaults()
    this.emit('mode', this.mode)
    this.#hold = this.#clock
      .setTimeout(() => {
        this.#hold = undefined
        this.#shares.clear()
        this.#refreshDefaults()
        this.emit('mode', 'none')
      }, lease.safeHoldMs)
      .unref()
  }
}
