import { preciseNow, wholeSlots, type Clock, type ResourceKind } from '../shared/index.js'
import type { DemandMeter } from './demand-meter.js'
import { TokenBucket } from '../shared/limiters/index.js'

/** Held capacity from `acquire`; `release()` gives concurrency slots back (a no-op for rate resources). */
export interface Permit {
  release(): void
}

/** A quota's next window sent ahead: its budget, and when it opens and ends, ms from now. */
export interface NextWindow {
  readonly index: number
  readonly capacity: number
  readonly startsInMs: number
  readonly endsInMs: number
}

/** What an enforcer tells the resource that owns it. */
export interface EnforcerHost {
  /** A rate check was refused: demand may be well above the lease. */
  refused(): void
  /**
   * A quota's block is half spent (once a lease): if it is going faster than the block was
   * sized for, an early report gets the next one before it runs dry (`throttled`).
   */
  lowOnBudget(): void
  /** Slots came back (concurrency): waiters may be served, a held-back ack may go. */
  slotsReleased(cost: number): void
}

/**
 * How a resource enforces the capacity in force: a token bucket refilled at
 * capacity tokens/s (`rate`), or a semaphore of capacity slots
 * (`concurrency`). Both meter demand for the report. `tryAcquire` is the hot
 * path: no allocation, no promise, no timer.
 */
export interface Enforcer {
  readonly kind: ResourceKind
  /** The policing check; `waiting` callers queued ahead keep it from jumping the queue. */
  tryAcquire(cost: number, waiting: number): boolean
  /** Admits `cost` for a waiter (no metering: the waiter was metered on arrival). */
  take(cost: number): boolean
  /** What a caller admitted for `cost` holds. */
  permit(cost: number): Permit
  /** Meters an `acquire` call as it arrives, before it is admitted or queued. */
  meterArrival(cost: number): void
  /** Meters a caller about to wait behind `waiting` others. */
  meterQueued(cost: number, waiting: number): void
  /** Whether a waiter is admitted by time passing (a bucket refills), so a wake timer helps. */
  readonly refills: boolean
  /**
   * The capacity in force changed; `moved`: from one lease to another (not a fallback's), a
   * rise holding `handed` tokens another holder gave up. Returns the tokens it gave up (a rate's
   * fall between leases: what the slices that fell held), 0 if none.
   */
  apply(capacity: number, burst: number, moved?: boolean, handed?: number): number
  /** Rate: the lease says the bucket may start full (`full`); a no-op for other kinds. */
  fill(): void
  /** Milliseconds until `cost` would be admitted (Infinity: not by waiting). */
  msUntil(cost: number): number
  /** Whole tokens or slots available now. */
  remaining(): number
  /** Milliseconds until back to the full burst (0 for slots: they come back on release). */
  msUntilFull(): number
  /** Slots in use (0 for rate). */
  readonly inFlight: number
  /** Slots in use for a usage report; undefined for a kind that holds none. */
  readonly reportedInFlight: number | undefined
  /** Whether what is in use fits the capacity in force (a decrease may be acknowledged). */
  readonly fits: boolean
  /** Demand over the window just ended. */
  takeDemand(nowMs: number, waitingCost: number): number
  /**
   * Whether demand so far is well above the capacity in force (an early report may help);
   * `periodMs`: the time between two reports, so about until the next lease.
   */
  throttled(nowMs: number, capacity: number, waiting: number, periodMs: number): boolean
  /**
   * Quota: the window a lease's budget belongs to, and how long it may be spent from now; and
   * the next window's budget sent ahead, spent from its start (`next`, times from now).
   * False when the lease is of a window over here, come after the next one it carried opened:
   * nothing of it applies (the resource keeps the lease it has).
   */
  window(index: number, endsInMs: number, next?: NextWindow): boolean
  /** Quota: units used in the window, for the report; undefined for other kinds. */
  usedInWindow(): { readonly used: number; readonly window: number } | undefined
}

const ratePermit: Permit = Object.freeze({ release: () => undefined })

export class RateEnforcer implements Enforcer {
  readonly kind = 'rate'
  readonly inFlight = 0
  readonly reportedInFlight = undefined
  readonly fits = true
  readonly refills = true
  readonly #bucket: TokenBucket
  readonly #meter: DemandMeter
  readonly #host: EnforcerHost

  constructor(clock: Clock, meter: DemandMeter, host: EnforcerHost) {
    this.#bucket = new TokenBucket(clock, 0, 0, 0)
    this.#meter = meter
    this.#host = host
  }

  tryAcquire(cost: number, waiting: number): boolean {
    const meter = this.#meter
    meter.ask(cost)
    if (waiting === 0 && this.#bucket.tryTake(cost)) {
      meter.admitted(cost)
      return true
    }
    meter.refused(cost)
    this.#host.refused()
    return false
  }

  take(cost: number): boolean {
    if (!this.#bucket.tryTake(cost)) return false
    this.#meter.admitted(cost)
    return true
  }

  permit(): Permit {
    return ratePermit
  }

  meterArrival(cost: number): void {
    this.#meter.ask(cost)
  }

  meterQueued(): void {}

  /**
   * A share of the limit moving here or away (rate and burst in the ratio they had, as every
   * lease of one limit is): moved as a keyed family's share is (TokenBucket.moveRate), except
   * that a fall gives up what the slices that fell held (returned, for the ack's `gave`: the
   * coordinator hands it to the rise the ack lets through), and a rise is a fresh part, empty,
   * earning the rate gained, with what was `handed` to it (a lease's `fill`) above it as an
   * excess going at that rate. A first holder that
   * started full and fell to a half as another joined used to drop the half it gave up, and the
   * joiner started from nothing. Anything else (the first lease, a lapse, a fallback, a new
   * limit) is set as it is (TokenBucket.setRate: none invented, what exceeds the new burst
   * dropped); from a lease of nothing, the bucket holds what was handed. `moved`: the capacity
   * in force before was a lease too, not a fallback the coordinator never counted.
   */
  apply(capacity: number, burst: number, moved = false, handed = 0): number {
    const bucket = this.#bucket
    const rate = bucket.ratePerSec
    const sameRatio =
      moved &&
      rate > 0 &&
      capacity > 0 &&
      Math.abs(burst * rate - capacity * bucket.burst) <= 1e-9 * capacity * bucket.burst
    if (!sameRatio) {
      bucket.setRate(capacity, burst)
      // From a lease of nothing: the bucket held nothing, and holds what was handed to it as a
      // rise does, below.
      if (moved && rate === 0 && handed > 0) bucket.holdGift(handed, burst, capacity)
      return 0
    }
    // A rise is a fresh part, empty, and holds what was handed to it as a gift (an excess going
    // at the rate gained, TokenBucket.holdGift). A fall gives its excess up, for the ack to say,
    // only from a plain bucket (one part, no excess): parts earn each to its own burst, and their
    // tokens in one fresh part at the riser would earn faster ('move' found it: 100.012 of 100).
    // A bucket in parts keeps its excess going, as before 3e7d059.
    const plain = bucket.partCount === 1 && bucket.excess === 0
    const gainedPerSec = capacity - rate
    const burstBefore = bucket.burst
    bucket.moveRate(capacity, burst)
    if (handed > 0 && gainedPerSec > 0) bucket.holdGift(handed, burst - burstBefore, gainedPerSec)
    return gainedPerSec < 0 && plain ? bucket.dropExcess() : 0
  }

  fill(): void {
    this.#bucket.fill()
  }

  msUntil(cost: number): number {
    return this.#bucket.msUntil(cost)
  }

  remaining(): number {
    return Math.floor(this.#bucket.tokens)
  }

  msUntilFull(): number {
    return this.#bucket.msUntilFull()
  }

  takeDemand(nowMs: number, waitingCost: number): number {
    return this.#meter.take(nowMs, true, waitingCost)
  }

  throttled(nowMs: number, capacity: number): boolean {
    return this.#meter.rateSoFar(nowMs) > 1.5 * capacity + 1
  }

  window(): boolean {
    return true
  }

  usedInWindow(): undefined {
    return undefined
  }
}

class SlotPermit implements Permit {
  #host: EnforcerHost | undefined
  readonly #cost: number
  constructor(host: EnforcerHost, cost: number) {
    this.#host = host
    this.#cost = cost
  }
  release(): void {
    const host = this.#host
    if (host === undefined) return
    this.#host = undefined
    host.slotsReleased(this.#cost)
  }
}

export class SlotEnforcer implements Enforcer {
  readonly kind = 'concurrency'
  readonly refills = false
  #inFlight = 0
  #limit = 0
  readonly #meter: DemandMeter
  readonly #host: EnforcerHost

  constructor(meter: DemandMeter, host: EnforcerHost) {
    this.#meter = meter
    this.#host = host
  }

  get inFlight(): number {
    return this.#inFlight
  }

  get reportedInFlight(): number {
    return this.#inFlight
  }

  get fits(): boolean {
    return this.#inFlight <= this.#limit
  }

  tryAcquire(cost: number, waiting: number): boolean {
    const meter = this.#meter
    if (waiting === 0 && this.#inFlight + cost <= this.#limit) {
      this.#inFlight += cost
      meter.observe(this.#inFlight)
      meter.inFlight(this.#inFlight)
      meter.admitted(cost)
      return true
    }
    meter.observe(this.#inFlight + cost)
    meter.refused(cost)
    return false
  }

  take(cost: number): boolean {
    if (this.#inFlight + cost > this.#limit) return false
    this.#inFlight += cost
    this.#meter.observe(this.#inFlight)
    this.#meter.inFlight(this.#inFlight)
    this.#meter.admitted(cost)
    return true
  }

  permit(cost: number): Permit {
    return new SlotPermit(this.#host, cost)
  }

  meterArrival(): void {}

  meterQueued(cost: number, waiting: number): void {
    this.#meter.observe(this.#inFlight + cost + waiting)
  }

  /** Gives back slots; never below 0. */
  release(cost: number): void {
    this.#inFlight = Math.max(0, this.#inFlight - cost)
  }

  apply(capacity: number): number {
    this.#limit = wholeSlots(capacity)
    return 0
  }

  fill(): void {}

  msUntil(cost: number): number {
    return this.#inFlight + cost <= this.#limit ? 0 : Infinity
  }

  remaining(): number {
    return Math.max(0, this.#limit - this.#inFlight)
  }

  msUntilFull(): number {
    return 0
  }

  takeDemand(nowMs: number, waitingCost: number): number {
    return this.#meter.take(nowMs, false, this.#inFlight + waitingCost)
  }

  throttled(_nowMs: number, _capacity: number, waiting: number): boolean {
    return waiting > 0
  }

  window(): boolean {
    return true
  }

  usedInWindow(): undefined {
    return undefined
  }
}

/** `QuotaEnforcer`'s next window while none is sent ahead. */
const noNext = -Infinity

/**
 * A quota's budget: the lease's capacity is what this process may use in
 * the window in all (what it used included); each admission spends from it,
 * nothing refills it but a new lease, and nothing is spent once the window
 * (less the grace) is over. Reports say what was used, so the coordinator
 * can size the next block and give back what was not.
 *
 * Between this window's end as this process places it (early, by the
 * margins that keep it inside the coordinator's window) and the next
 * window's start sent ahead (late, by the same), the coordinator's clock may
 * be in either window. A check there is admitted only if both budgets have
 * room, and is spent from both (`#straddle`): whichever window it truly falls
 * in counts it, so neither is exceeded, and an unspent budget is not refused
 * for the few ms of the margins (#41: 0.12–0.17% of the checks within 5 s of
 * an edge were refused there, in 10 ms ticks of a gateway's traffic).
 */
/** A quota's block half spent within this part of a report period of its lease: its pace rose (`throttled`). */
const paceRisen = 0.75

export class QuotaEnforcer implements Enforcer {
  readonly kind = 'quota'
  readonly inFlight = 0
  readonly reportedInFlight = undefined
  readonly refills = false
  #budget = 0
  #used = 0
  #index: number | undefined = undefined
  #endAtMs = 0
  /** The next window sent ahead (`noNext`: none): its budget, spent from its start to its end. */
  #nextIndex = noNext
  #nextBudget = 0
  /** The count of used at which the block leased last is half spent (`lowOnBudget`, once). */
  #lowWaterUsed = Infinity
  /** When the budget in force came (a lease, or the next window's opening), on the hot clock. */
  #armedAtMs = 0
  /** How long after it came half of it was spent (Infinity: not yet). */
  #halfSpentInMs = Infinity
  /** Spent from the next window's budget before it opened here: checks between the windows. */
  #nextUsed = 0
  #nextStartAtMs = 0
  #nextEndAtMs = 0
  readonly #clock: Clock
  readonly #meter: DemandMeter
  readonly #host: EnforcerHost

  constructor(clock: Clock, meter: DemandMeter, host: EnforcerHost) {
    this.#clock = clock
    this.#meter = meter
    this.#host = host
  }

  get fits(): boolean {
    return this.#used <= this.#budget
  }

  tryAcquire(cost: number, waiting: number): boolean {
    const meter = this.#meter
    meter.ask(cost)
    if (waiting === 0 && this.#spend(cost)) {
      meter.admitted(cost)
      return true
    }
    meter.refused(cost)
    this.#host.refused()
    return false
  }

  take(cost: number): boolean {
    if (!this.#spend(cost)) return false
    this.#meter.admitted(cost)
    return true
  }

  #spend(cost: number): boolean {
    if (this.#used + cost > this.#budget || this.#clock.now() >= this.#endAtMs) {
      // Past the window's end, the next one's budget sent ahead may be in force (cold: once).
      if (!this.#advance()) return this.#straddle(cost)
      if (this.#used + cost > this.#budget) return false
    }
    this.#used += cost
    if (this.#used >= this.#lowWaterUsed) {
      this.#lowWaterUsed = Infinity
      this.#halfSpentInMs = this.#clock.now() - this.#armedAtMs
      this.#host.lowOnBudget()
    }
    return true
  }

  /**
   * Between this window's end and the next one's start sent ahead (both as placed here): spent
   * from both budgets, or refused. Whichever window the coordinator's clock is in counts it.
   */
  #straddle(cost: number): boolean {
    if (!this.#between()) return false
    if (this.#used + cost > this.#budget || this.#nextUsed + cost > this.#nextBudget) return false
    this.#used += cost
    this.#nextUsed += cost
    return true
  }

  /** Whether now is past this window's end and before the next one's start sent ahead. */
  #between(): boolean {
    if (this.#nextIndex === noNext) return false
    const now = this.#clock.now()
    return now >= this.#endAtMs && now < this.#nextStartAtMs
  }

  /**
   * Puts the next window's budget sent ahead in force once this window is over and that one
   * has opened (on this process's clock, placed late: never before it opens). Returns whether
   * a budget is in force now.
   */
  #advance(): boolean {
    if (this.#nextIndex === noNext) return false
    const now = this.#clock.now()
    if (now < this.#endAtMs || now < this.#nextStartAtMs) return false
    this.#index = this.#nextIndex
    this.#used = this.#nextUsed
    this.#budget = this.#nextBudget
    this.#endAtMs = this.#nextEndAtMs
    this.#armLowWater()
    this.#nextIndex = noNext
    return now < this.#endAtMs
  }

  permit(): Permit {
    return ratePermit
  }

  meterArrival(cost: number): void {
    this.#meter.ask(cost)
  }

  meterQueued(): void {}

  apply(capacity: number): number {
    this.#budget = wholeSlots(capacity)
    this.#armLowWater()
    return 0
  }

  /** Half of what the budget in force leaves, spent: the moment to see whether it lasts. */
  #armLowWater(): void {
    this.#lowWaterUsed = this.#used + Math.max(1, Math.ceil((this.#budget - this.#used) / 2))
    this.#armedAtMs = this.#clock.now()
    this.#halfSpentInMs = Infinity
  }

  fill(): void {}

  window(index: number, endsInMs: number, next?: NextWindow): boolean {
    this.#advance()
    // A lease of the window before, made before its end and come after this process put the
    // next window's budget it carried in force: nothing new (the resource applies none of it).
    if (this.#index !== undefined && index < this.#index && next?.index === this.#index)
      return false
    // A newer window: a new budget, nothing used yet. An older one (a coordinator whose clock
    // went back, without the ledger that would have kept it on the newer) never brings back a
    // fresh count: its budget is held to what was used in the newer one, which stays the one
    // reported.
    if (this.#index === undefined || index > this.#index) {
      // The next window's own lease, come before it opened here: what was spent from it between
      // the windows stays spent.
      this.#used = this.#nextIndex !== noNext && index === this.#nextIndex ? this.#nextUsed : 0
      this.#index = index
    }
    const now = this.#clock.now()
    this.#endAtMs = now + endsInMs
    // The next window's budget sent ahead, kept until a lease of that window comes (a lease of
    // this one without it leaves it: the coordinator counts it until that window's end).
    if (next !== undefined && next.index > this.#index) {
      // Sent again (each lease of this window carries it): what was spent of it stays spent.
      if (next.index !== this.#nextIndex) this.#nextUsed = 0
      this.#nextIndex = next.index
      this.#nextBudget = wholeSlots(next.capacity)
      // Its start from the real time, not a coarse reading (which lags it, by ms when the event
      // loop was busy): placed on a lagging reading, the next window would open that much early.
      // Its end, as this window's, from the reading: never later than the real one.
      this.#nextStartAtMs = preciseNow(this.#clock) + next.startsInMs
      this.#nextEndAtMs = now + next.endsInMs
    } else if (this.#nextIndex !== noNext && this.#index >= this.#nextIndex)
      this.#nextIndex = noNext
    return true
  }

  /** The next window's budget sent ahead is void (the client's id was taken over). */
  forgetNext(): void {
    this.#nextIndex = noNext
  }

  usedInWindow(): { used: number; window: number } | undefined {
    this.#advance()
    return this.#index === undefined ? undefined : { used: this.#used, window: this.#index }
  }

  /**
   * What a clean close says it used (the coordinator gives the rest of the block back, and the
   * block of the next window sent ahead with it, as none of it was spent). Between the windows,
   * once some of the next window's block was spent here (`#straddle`), that window's count: the
   * coordinator then keeps the block ahead counted, and gives back nothing of the window ending
   * either, unless that one is over there too (server/pool/clients.ts; test/server/pool/ahead.test.ts).
   */
  usedAtClose(): { used: number; window: number } | undefined {
    this.#advance()
    if (this.#between() && this.#nextUsed > 0)
      return { used: this.#nextUsed, window: this.#nextIndex }
    return this.usedInWindow()
  }

  /** Starts from what a released handle of the same id used in `index` (Resource.carryUsed). */
  carry(used: number, index: number): void {
    this.#index = index
    this.#used = used
  }

  /** 0 while the budget has room; spent, until the window ends (when a new budget comes). */
  msUntil(cost: number): number {
    this.#advance()
    const now = this.#clock.now()
    if (this.#used + cost <= this.#budget && now < this.#endAtMs) return 0
    if (this.#between()) {
      if (this.#used + cost <= this.#budget && this.#nextUsed + cost <= this.#nextBudget) return 0
      if (this.#nextUsed + cost <= this.#nextBudget) return Math.max(1, this.#nextStartAtMs - now)
    }
    return this.#index === undefined ? Infinity : Math.max(1, this.#endAtMs - now)
  }

  remaining(): number {
    // Past the window's end nothing is left of it but what both it and the next one's budget
    // sent ahead have room for, until that one opens: what a check would say.
    if (this.#clock.now() >= this.#endAtMs && !this.#advance()) {
      if (!this.#between()) return 0
      return Math.max(0, Math.min(this.#budget - this.#used, this.#nextBudget - this.#nextUsed))
    }
    return Math.max(0, this.#budget - this.#used)
  }

  /** Until the window ends: when a spent budget comes back (a new one). */
  msUntilFull(): number {
    this.#advance()
    return Math.max(0, this.#endAtMs - this.#clock.now())
  }

  takeDemand(nowMs: number, waitingCost: number): number {
    return this.#meter.take(nowMs, true, waitingCost)
  }

  /**
   * Asked for faster than the block lasts, or most of it spent: a report now sizes the next
   * block. Faster than it lasts: half of what the lease in force left was spent within
   * `paceRisen` of a report period of its coming. A block is sized for two periods of the
   * demand last reported (and the round trip): spent at that pace, half of it goes about when
   * the next lease comes, and it is not reported early; spent half in three quarters of a
   * period or less, the pace rose by a third or more, and what is left would run dry before
   * the next lease (a block sized on a demand measured before the pace rose ran dry once
   * before it grew: docs/benchmarks.md, "Checks between two windows spent from both").
   */
  throttled(nowMs: number, _capacity: number, _waiting: number, periodMs: number): boolean {
    if (!(this.#meter.rateSoFar(nowMs) > 0)) return false
    return this.remaining() < 0.25 * this.#budget + 1 || this.#halfSpentInMs < paceRisen * periodMs
  }
}

/** One enforcer per kind, made once per resource: a lease names the kind in force. */
export type Enforcers = Readonly<Record<ResourceKind, Enforcer>> & {
  readonly concurrency: SlotEnforcer
  readonly quota: QuotaEnforcer
}

/** The enforcers of one resource, sharing its demand meter. */
export function createEnforcers(
  hotClock: Clock,
  meter: DemandMeter,
  host: EnforcerHost,
): Enforcers {
  return Object.freeze({
    rate: new RateEnforcer(hotClock, meter, host),
    concurrency: new SlotEnforcer(meter, host),
    quota: new QuotaEnforcer(hotClock, meter, host),
  })
}
