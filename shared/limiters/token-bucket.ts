import type { Clock } from '../clock.js'
import { CoarseClock } from '../coarse-clock.js'
import { BucketParts } from './bucket-parts.js'

/**
 * A token bucket on an injected clock: refills at `ratePerSec`, holds at most
 * `burst`. `tryTake` is the hot path: one clock read, arithmetic, no
 * allocation, no promise, no timer.
 *
 * On a CoarseClock (a cached reading that lags real time) a take at one
 * reading may really happen as late as the clock's next reading, so the
 * refill up to then is capped before what was taken is subtracted, as if it
 * were all taken at that moment: the bucket never holds more than an exact
 * bucket would, however late the readings come
 * (test/client/limiters/coarse-clock.test.ts proves the interval bound). On
 * a precise clock what was taken was taken at the reading itself.
 */
export class TokenBucket {
  #ratePerMs: number
  #burst: number
  /** Tokens at `#lastMs` before what was taken since (`#taken`). */
  #tokens: number
  #taken = 0
  #lastMs: number
  /**
   * While the share this bucket enforces moves (`moveRate`): its parts and the
   * excess kept from falls (shared/limiters/bucket-parts.ts); undefined for a plain bucket (the
   * common case). `#tokens` is then what they hold together.
   */
  #parts: BucketParts | undefined = undefined
  /**
   * On a coarse clock, the reading a rise came at: its fresh part earns from the reading after
   * it (as late as the rise may really have come); -1 when none waits.
   */
  #riseReading = -1
  /**
   * An excess kept on a coarse clock: it goes with time, so what a reading says of it may be
   * gone by the real time of a take at that reading (as late as the next one). Such a take
   * reads the real time (`#takeAtRealTime`).
   */
  #excessOnCoarse = false
  /** The coarse clock's index of the reading `#lastMs` is. */
  #lastReading = 0
  readonly #coarse: CoarseClock | undefined
  readonly #clock: Clock

  constructor(clock: Clock, ratePerSec: number, burst: number, initialTokens = burst) {
    this.#clock = clock
    this.#ratePerMs = ratePerSec / 1000
    this.#burst = burst
    this.#tokens = Math.min(initialTokens, burst)
    this.#lastMs = clock.now()
    this.#coarse = clock instanceof CoarseClock ? clock : undefined
    if (this.#coarse !== undefined) this.#lastReading = this.#coarse.readingIndex
  }

  get ratePerSec(): number {
    return this.#ratePerMs * 1000
  }

  get burst(): number {
    return this.#burst
  }

  /** Tokens available now. */
  get tokens(): number {
    this.#refill(this.#clock.now())
    return this.tokensAtLastReading
  }

  /** Tokens there were at the last clock reading, after what was taken at it; reads no clock. */
  get tokensAtLastReading(): number {
    return this.#tokens - this.#taken
  }

  /** Milliseconds from the last clock reading until the bucket is full; reads no clock. */
  msUntilFullAtLastReading(): number {
    // Not `this.tokensAtLastReading`: the extra inlined call cost about 240 instructions per
    // request in a loop of RateLimitCore.decide (1,690 -> 1,932), V8's inlining budget again.
    const tokens = this.#tokens - this.#taken
    if (this.#parts !== undefined) return this.#partsNow(this.#parts).msUntilFull()
    if (tokens >= this.#burst) return 0
    return this.#ratePerMs > 0 ? (this.#burst - tokens) / this.#ratePerMs : Infinity
  }

  /** Takes `cost` tokens if they are there. */
  tryTake(cost: number): boolean {
    const now = this.#clock.now()
    if (now > this.#lastMs) this.#refill(now)
    if (this.#tokens - this.#taken < cost) return false
    if (this.#excessOnCoarse) return this.#takeAtRealTime(cost)
    this.#taken += cost
    return true
  }

  /**
   * A take from a bucket holding an excess on a coarse clock: what the excess lost since the
   * last reading, by the real time now, is not there to take (what the parts earned meanwhile
   * is not counted, nor that earlier takes spent some of it before it went: less, never more).
   */
  #takeAtRealTime(cost: number): boolean {
    const parts = this.#parts!
    // Gone whatever was taken of it before: takes at this reading came earlier, if anything.
    const goneMs = this.#coarse!.preciseNow() - this.#lastMs
    const gone = goneMs > 0 ? Math.min(parts.excess, goneMs * parts.excessGoesPerMs) : 0
    if (this.#tokens - this.#taken - gone < cost) return false
    this.#taken += cost
    return true
  }

  /** Milliseconds until `cost` tokens will be there (0 if now; Infinity if never at this rate and burst). */
  msUntil(cost: number): number {
    this.#refill(this.#clock.now())
    const tokens = this.#tokens - this.#taken
    if (tokens >= cost) return 0
    if (this.#parts !== undefined) return this.#partsNow(this.#parts).msUntil(cost)
    if (cost > this.#burst || this.#ratePerMs <= 0) return Infinity
    return (cost - tokens) / this.#ratePerMs
  }

  /** Milliseconds until the bucket is full again. */
  msUntilFull(): number {
    this.#refill(this.#clock.now())
    return this.msUntilFullAtLastReading()
  }

  /** Puts back `cost` tokens taken earlier (never above the burst). */
  refund(cost: number): void {
    this.#refill(this.#clock.now())
    // Give back from what was taken since the last reading first, then to the bucket (capped).
    const back = cost < this.#taken ? cost : this.#taken
    this.#taken -= back
    if (this.#parts !== undefined) {
      this.#parts.refund(cost - back)
      this.#tokens = this.#parts.tokens
      return
    }
    // What is available is `#tokens` less what was taken since the last reading: capped there.
    const t = this.#tokens + (cost - back)
    const most = this.#burst + this.#taken
    this.#tokens = t < most ? t : most
  }

  /**
   * Changes rate and burst. Tokens earned so far are counted at the old rate;
   * none are invented; what exceeds the new burst is dropped.
   */
  setRate(ratePerSec: number, burst: number): void {
    this.#refill(this.#clock.now())
    const t = this.#tokens - this.#taken
    this.#parts = undefined
    this.#excessOnCoarse = false
    this.#ratePerMs = ratePerSec / 1000
    this.#burst = burst
    if (t > burst) this.#tokens = burst + this.#taken
  }

  /**
   * Changes rate and burst as a share of one limit moves between processes
   * (its whole unchanged), as of `atMs` (now, or a time since the last
   * reading: a change seen late). A fall keeps what the slices that fell held,
   * spent here as it may be, going at the rate that fell; a rise is a fresh
   * part, empty (holding what it earned in `risenForMs` if it came that long
   * ago), earning at the rate gained, while the old part earns up to its old
   * burst only. So the tokens held across the processes never exceed one
   * bucket of the whole limit, and the burst a move used to drop is spent
   * (shared/limiters/bucket-parts.ts; docs/keys.md, "A share that moves").
   */
  moveRate(ratePerSec: number, burst: number, atMs = Infinity, risenForMs = 0): void {
    const nowMs = this.#clock.now()
    this.#refill(atMs < nowMs ? atMs : nowMs)
    const ratePerMs = ratePerSec / 1000
    if (ratePerMs === this.#ratePerMs && burst === this.#burst) return
    // What was taken at the last reading stays to be taken at the next refill (from the excess
    // first): on a coarse clock it may have been taken as late as the next reading.
    const parts = this.#parts ?? new BucketParts(this.#tokens, this.#burst, this.#ratePerMs)
    this.#parts = parts
    const fallPerMs = this.#ratePerMs - ratePerMs
    if (fallPerMs > 0) parts.fall(fallPerMs)
    // What the burst still has to fall or rise once the rate's slices went (0 after a fall in
    // the limit's ratio, as a share's is).
    const burstGained = burst - parts.burst
    const tiny = 1e-9 * Math.max(1, burst)
    if (burstGained < -tiny) parts.cutBurst(-burstGained)
    if (fallPerMs < 0 || burstGained > tiny) {
      const coarse = this.#coarse
      parts.rise(
        Math.max(0, -fallPerMs),
        Math.max(0, burstGained),
        risenForMs,
        coarse !== undefined ? Infinity : -Infinity,
      )
      if (coarse !== undefined) this.#riseReading = coarse.readingIndex
    }
    this.#ratePerMs = ratePerMs
    this.#burst = burst
    this.#afterParts()
  }

  /**
   * Gives up what falls left above the burst (the excess) and returns it: for a rise elsewhere
   * to hold instead, in the fresh part of the rate that moved (`moveRate`'s `risenForMs`,
   * capped at the burst gained): a named rate's fall, said in its ack (client/enforcer.ts; the
   * design is modelled in test/server/pool/burst-slack.test.ts, 'move').
   */
  dropExcess(): number {
    const nowMs = this.#clock.now()
    this.#refill(nowMs)
    const parts = this.#parts
    if (parts === undefined) return 0
    // What was taken since the last reading came from the excess first.
    parts.spend(parts.spendExcess(this.#taken))
    this.#taken = 0
    const dropped = parts.dropExcess()
    this.#afterParts()
    return dropped
  }

  /**
   * Holds `tokens` another bucket gave up as an excess above the burst, going at `goesPerSec`
   * until none is left, spent first, earning nothing: as the giver's fall would have kept them
   * (a fall's gift to a joiner's first share: server/pool/fall-gifts.ts). Never a full part of
   * the burst: a part refills at its rate, while the giver's excess would have gone.
   */
  addExcess(tokens: number, goesPerSec: number): void {
    if (!(tokens > 0) || !(goesPerSec > 0)) return
    this.#refill(this.#clock.now())
    const parts = this.#parts ?? new BucketParts(this.#tokens, this.#burst, this.#ratePerMs)
    this.#parts = parts
    parts.addExcess(tokens, goesPerSec / 1000)
    this.#afterParts()
  }

  /**
   * Holds a rise's gift (what the falls that paid for it gave up, a lease's `fill`): an excess
   * above the burst, never more than the burst gained, spent first and going at the rate gained
   * until none is left (`addExcess`). Never tokens of the rise's fresh part: a rise may be paid
   * for by falls that kept their excess going too (a bucket in parts gives nothing), which the
   * fresh part pays for by starting empty; a gift in it, earning at the whole rate gained, let
   * the holders together hold more than the key's burst (BurstSlack's 'moveTwo', 100.005 of
   * 100; test/client/keyed.test.ts). Call after the rise's `moveRate` (or `setRate`).
   */
  holdGift(tokens: number, burstGained: number, gainedPerSec: number): void {
    this.addExcess(Math.min(tokens, burstGained), gainedPerSec)
  }

  /**
   * Gives up `fraction` (0..1] of the excess, with as much of the rate it goes at; the rest goes
   * on at the rest of the rate. Returns the tokens given and their rate per second: where they
   * go, they go at that rate (TokenBucket.addExcess), so neither part outlives what the whole
   * would have held (a share that fell for a joiner passing on part of a gift it holds).
   */
  splitExcess(fraction: number): [number, number] {
    const nowMs = this.#clock.now()
    this.#refill(nowMs)
    const parts = this.#parts
    if (parts === undefined) return [0, 0]
    // What was taken since the last reading came from the excess first.
    parts.spend(parts.spendExcess(this.#taken))
    this.#taken = 0
    const [tokens, goesPerMs] = parts.splitExcess(fraction)
    this.#afterParts()
    return [tokens, goesPerMs * 1000]
  }

  /** Tokens kept from falls, still going (0 without). */
  get excess(): number {
    this.#refill(this.#clock.now())
    // What was taken at the last reading came from it first.
    const excess = (this.#parts?.excess ?? 0) - this.#taken
    return excess > 0 ? excess : 0
  }

  /**
   * The parts with what was taken at the last reading spent from them (a copy when anything
   * was: on a coarse clock it is spent at the next refill, as late as it may have been taken).
   */
  #partsNow(parts: BucketParts): BucketParts {
    if (!(this.#taken > 0)) return parts
    const now = parts.clone()
    now.spend(now.spendExcess(this.#taken))
    now.tidy()
    return now
  }

  /** Parts kept apart while the share moves (1 for a plain bucket; for tests). */
  get partCount(): number {
    return this.#parts?.partCount ?? 1
  }

  /** Fills the bucket to its burst (what a lease that may start full allows). */
  fill(): void {
    this.#refill(this.#clock.now())
    this.#parts = undefined
    this.#excessOnCoarse = false
    this.#tokens = this.#burst + this.#taken
  }

  #refill(now: number): void {
    if (now <= this.#lastMs) return
    if (this.#parts !== undefined) return this.#refillParts(now, this.#parts)
    const coarse = this.#coarse
    let t = this.#tokens
    if (coarse !== undefined) {
      // What was taken at the last reading was taken by the clock's next one at the latest:
      // earn up to then, capped, as if it were all taken then.
      const takenByMs = coarse.readingAfter(this.#lastReading)
      t += (takenByMs - this.#lastMs) * this.#ratePerMs
      if (t > this.#burst) t = this.#burst
      t += (now - takenByMs) * this.#ratePerMs - this.#taken
      this.#lastReading = coarse.readingIndex
    } else t += (now - this.#lastMs) * this.#ratePerMs - this.#taken
    this.#tokens = t < this.#burst ? t : this.#burst
    this.#taken = 0
    this.#lastMs = now
  }

  /**
   * A moving bucket (`#parts`): what was taken comes from the excess first, then from the
   * parts; the excess goes and the parts earn. On a coarse clock what was taken at the last
   * reading is taken at the reading after it, as the plain path does.
   */
  #refillParts(now: number, parts: BucketParts): void {
    const coarse = this.#coarse
    const lastMs = this.#lastMs
    if (coarse !== undefined) {
      if (this.#riseReading >= 0 && coarse.readingIndex > this.#riseReading) {
        parts.earnFrom(coarse.readingAfter(this.#riseReading))
        this.#riseReading = -1
      }
      // Taken by the reading after the last at the latest: the excess went and the parts
      // earned (capped) up to then first.
      const takenByMs = Math.min(now, coarse.readingAfter(this.#lastReading))
      parts.goes(takenByMs - lastMs)
      parts.earn(lastMs, takenByMs)
      parts.spend(parts.spendExcess(this.#taken))
      parts.goes(now - takenByMs)
      parts.earn(takenByMs, now)
      this.#lastReading = coarse.readingIndex
    } else {
      parts.spend(parts.spendExcess(this.#taken))
      parts.goes(now - lastMs)
      parts.earn(lastMs, now)
    }
    this.#taken = 0
    this.#lastMs = now
    this.#afterParts()
  }

  /** The parts' tokens are the bucket's; once settled, a plain bucket again. */
  #afterParts(): void {
    const parts = this.#parts!
    this.#excessOnCoarse = this.#coarse !== undefined && parts.excess > 0
    if (!parts.settled) {
      this.#tokens = parts.tokens
      return
    }
    const t = parts.onlyTokens
    this.#tokens = t < this.#burst ? t : this.#burst
    this.#parts = undefined
  }
}
