/** One part of a bucket whose share moved: it earns at its own rate, up to its own burst. */
interface Part {
  tokens: number
  burst: number
  ratePerMs: number
  /** It earns from then on (a rise at a clock reading that lags: the next reading's time). */
  earnsFromMs: number
}

/** Parts kept apart at most; past that the two nearest in fill are merged the safe way. */
const maxParts = 4
/** Fills (tokens ÷ burst) this close are one fill: the parts are one part again. */
const sameFill = 1e-9

function fill(p: Part): number {
  return p.burst > 0 ? p.tokens / p.burst : 1
}

/**
 * A token bucket's tokens while its share of a limit moves between
 * processes (TokenBucket.moveRate), kept so that across the
 * processes the limit's tokens never exceed one bucket of the whole limit,
 * however each spends:
 *
 * - **A fall** takes slices of the emptiest parts: each part keeps what still
 *   fits its new burst, and only what does not is an excess, kept, spent
 *   first, going at the rate that fell, earning nothing. A slice of rate f
 *   leaves at most f × refill time, gone within one refill time, at f. (A
 *   key spent as it comes holds a fraction of a token; had a slice of that
 *   fraction gone as excess it would have gone before it made a whole one.)
 * - **A rise** is a fresh part, empty, earning at the rate gained up to the
 *   burst gained. What the rise came from (another process's fall, at or
 *   before it) goes at that rate: the fresh part and the excess it pays for
 *   never hold more together than the slice did. A rise's part that falls
 *   again keeps what fits, as any part: its own excess elsewhere still goes
 *   at the whole rate it rose by, which pays for what the part and the new
 *   riser earn together. The old parts earn as before, up to their own
 *   bursts only, so a riser whose old part was full earns nothing for it
 *   (the gap the CI found at seed 681887440).
 * - Spending takes from the excess, then from the fullest part: it keeps each
 *   part earning as long as may be. Parts whose fills meet are one part (every
 *   part earns its fill back at the same pace when its rate and burst are in
 *   the ratio the limit's are), and with one part and no excess the bucket is
 *   plain again. More than `maxParts` parts: the two nearest in fill merge at
 *   the lower fill (tokens dropped, never invented).
 *
 * Pure: the bucket gives it the time and what was taken.
 */
export class BucketParts {
  /** The parts, the fullest first (after `tidy`). */
  readonly #parts: Part[]
  /** Tokens kept from falls: spent first, going at `#excessGoesPerMs`, earning nothing. */
  excess = 0
  #excessGoesPerMs = 0

  constructor(tokens: number, burst: number, ratePerMs: number) {
    this.#parts =
      burst > 0
        ? [{ tokens: Math.min(tokens, burst), burst, ratePerMs, earnsFromMs: -Infinity }]
        : []
  }

  /** A copy (to ask what it would be after a spend, leaving this as it is). */
  clone(): BucketParts {
    const c = new BucketParts(0, 0, 0)
    for (const p of this.#parts) c.#parts.push({ ...p })
    c.excess = this.excess
    c.#excessGoesPerMs = this.#excessGoesPerMs
    return c
  }

  /** Tokens held: the excess and every part's. */
  get tokens(): number {
    let t = this.excess
    for (const p of this.#parts) t += p.tokens
    return t
  }

  /** The parts' bursts together. */
  get burst(): number {
    let b = 0
    for (const p of this.#parts) b += p.burst
    return b
  }

  /** One part or none, earning already, and no excess: a plain bucket again. */
  get settled(): boolean {
    return (
      this.excess <= 0 &&
      this.#parts.length <= 1 &&
      (this.#parts[0] === undefined || this.#parts[0].earnsFromMs !== Infinity)
    )
  }

  /** The excess given up (a share that fell hands what its slices held on); returns it. */
  dropExcess(): number {
    const dropped = Math.max(0, this.excess)
    this.#noExcess()
    return dropped
  }

  /**
   * Tokens another bucket gave up, held here as an excess going at `goesPerMs` (a fall's gift to
   * a joiner, going on its line: server/pool/fall-gifts.ts). With an excess going already, both
   * go together at the two rates: never more than each going alone.
   */
  addExcess(tokens: number, goesPerMs: number): void {
    if (!(tokens > 0) || !(goesPerMs > 0)) return
    this.excess += tokens
    this.#excessGoesPerMs += goesPerMs
  }

  /**
   * Gives up `fraction` of the excess and of the rate it goes at (the rest goes on at the rest
   * of the rate: each part no more than the whole would have been); returns what it gave, and
   * the rate (per ms) that goes with it.
   */
  splitExcess(fraction: number): [number, number] {
    if (this.excess <= 0 || !(fraction > 0)) return [0, 0]
    if (fraction >= 1) {
      const given: [number, number] = [this.excess, this.#excessGoesPerMs]
      this.#noExcess()
      return given
    }
    const given: [number, number] = [this.excess * fraction, this.#excessGoesPerMs * fraction]
    this.excess -= given[0]
    this.#excessGoesPerMs -= given[1]
    return given
  }

  /** The tokens of the one part left (settled), 0 without one. */
  get onlyTokens(): number {
    return this.#parts[0]?.tokens ?? 0
  }

  /** The rate the excess goes at, per ms (0 without one). */
  get excessGoesPerMs(): number {
    return this.#excessGoesPerMs
  }

  /** Parts kept apart now (for tests). */
  get partCount(): number {
    return this.#parts.length
  }

  /** `ms` passed: the excess went at its rate. */
  goes(ms: number): void {
    if (this.excess <= 0 || !(ms > 0)) return
    this.excess -= ms * this.#excessGoesPerMs
    if (this.excess <= 0) this.#noExcess()
  }

  /** Pays what it can of `amount` from the excess; returns the rest. */
  spendExcess(amount: number): number {
    if (this.excess <= 0 || !(amount > 0)) return amount
    if (amount < this.excess) {
      this.excess -= amount
      return 0
    }
    const rest = amount - this.excess
    this.#noExcess()
    return rest
  }

  /** Takes `amount` from the parts, the fullest first, down to the next one's fill, then both. */
  spend(amount: number): void {
    const parts = this.#parts
    while (amount > 0 && parts.length > 0) {
      const top = parts[0]!
      const next = parts[1]
      if (next === undefined) {
        top.tokens -= amount
        return
      }
      const downTo = fill(next) * top.burst
      const room = top.tokens - downTo
      if (amount < room) {
        top.tokens -= amount
        return
      }
      amount -= room > 0 ? room : 0
      // Down to the next one's fill: one part now.
      next.tokens += downTo
      if (top.earnsFromMs > next.earnsFromMs) next.earnsFromMs = top.earnsFromMs
      next.burst += top.burst
      next.ratePerMs += top.ratePerMs
      parts.shift()
    }
  }

  /** From `fromMs` to `toMs` each part earned at its rate (from when it earns), up to its burst. */
  earn(fromMs: number, toMs: number): void {
    if (!(toMs > fromMs)) return
    for (const p of this.#parts) {
      const ms = toMs - (p.earnsFromMs > fromMs ? p.earnsFromMs : fromMs)
      if (!(ms > 0)) continue
      const t = p.tokens + ms * p.ratePerMs
      p.tokens = t < p.burst ? t : p.burst
    }
    this.tidy()
  }

  /** Parts that earn from `Infinity` (a rise at a reading that lagged) earn from `atMs`. */
  earnFrom(atMs: number): void {
    for (const p of this.#parts) if (p.earnsFromMs === Infinity) p.earnsFromMs = atMs
  }

  /** Puts back `amount` taken earlier: to the fullest parts, none above its burst. */
  refund(amount: number): void {
    for (const p of this.#parts) {
      if (!(amount > 0)) break
      const back = Math.min(amount, p.burst - p.tokens)
      if (back > 0) {
        p.tokens += back
        amount -= back
      }
    }
    this.tidy()
  }

  /**
   * The rate fell by `ratePerMs`: slices of the emptiest parts go, each with its share of the
   * part's burst; what a part holds beyond its new burst is kept as excess going at the rate
   * that fell.
   */
  fall(ratePerMs: number): void {
    const parts = this.#parts
    for (let i = parts.length - 1; i >= 0 && ratePerMs > 0; i--) {
      const p = parts[i]!
      if (!(p.ratePerMs > 0)) continue
      const take = Math.min(ratePerMs, p.ratePerMs)
      const q = take / p.ratePerMs
      p.burst -= p.burst * q
      p.ratePerMs -= take
      ratePerMs -= take
      // The slice takes what the part cannot hold any more, no more.
      const tokens = p.tokens - p.burst
      if (tokens > 0) {
        p.tokens = p.burst
        this.excess += tokens
        this.#excessGoesPerMs += take
      }
    }
    this.tidy()
  }

  /** The burst fell by `burst` with no fall of the rate: the emptiest parts shrink, their fill kept. */
  cutBurst(burst: number): void {
    const parts = this.#parts
    for (let i = parts.length - 1; i >= 0 && burst > 0; i--) {
      const p = parts[i]!
      const cut = Math.min(burst, p.burst)
      p.tokens -= p.burst > 0 ? (p.tokens * cut) / p.burst : 0
      p.burst -= cut
      burst -= cut
    }
    this.tidy()
  }

  /**
   * A rise: a fresh part of the rate and burst gained, holding what it earned in `earnedForMs`,
   * earning from `earnsFromMs` (Infinity: from when `earnFrom` says).
   */
  rise(ratePerMs: number, burst: number, earnedForMs = 0, earnsFromMs = -Infinity): void {
    if (!(burst > 0)) return
    const earned = earnedForMs > 0 ? ratePerMs * earnedForMs : 0
    this.#parts.push({ tokens: earned < burst ? earned : burst, burst, ratePerMs, earnsFromMs })
    this.tidy()
  }

  /**
   * Milliseconds until the bucket holds `want` tokens (0 if now, Infinity if never): the
   * excess going and each part earning to its burst draw a line with a few bends; the first
   * point on it at `want`.
   */
  msUntil(want: number): number {
    let atMs = 0
    let held = this.#tokensAt(0)
    if (held >= want) return 0
    for (;;) {
      // The next bend: the excess gone, or a part full.
      let bendMs = Infinity
      if (this.excess > 0 && this.#excessGoesPerMs > 0) {
        const ms = this.excess / this.#excessGoesPerMs
        if (ms > atMs) bendMs = ms
      }
      for (const p of this.#parts)
        if (p.ratePerMs > 0 && p.tokens < p.burst) {
          const ms = (p.burst - p.tokens) / p.ratePerMs
          if (ms > atMs && ms < bendMs) bendMs = ms
        }
      if (bendMs === Infinity) return Infinity
      const atBend = this.#tokensAt(bendMs)
      if (atBend >= want) {
        // On the line between: it rises here (it reached `want` from below).
        return atMs + ((want - held) / (atBend - held)) * (bendMs - atMs)
      }
      atMs = bendMs
      held = atBend
    }
  }

  /** Milliseconds until every part is full (Infinity if one never will be). */
  msUntilFull(): number {
    let ms = 0
    for (const p of this.#parts)
      if (p.tokens < p.burst)
        ms = Math.max(ms, p.ratePerMs > 0 ? (p.burst - p.tokens) / p.ratePerMs : Infinity)
    return ms
  }

  /**
   * Parts with no burst go; the fullest first; parts whose fills meet are one; more than
   * `maxParts`: the two nearest in fill merge at the lower one.
   */
  tidy(): void {
    const parts = this.#parts
    for (let i = parts.length - 1; i >= 0; i--) if (!(parts[i]!.burst > 1e-12)) parts.splice(i, 1)
    if (parts.length < 2) return
    parts.sort((a, b) => fill(b) - fill(a))
    for (let i = parts.length - 1; i > 0; i--) {
      const a = parts[i - 1]!
      const b = parts[i]!
      if (fill(a) - fill(b) <= sameFill) merge(parts, i - 1, fill(b))
    }
    while (parts.length > maxParts) {
      let best = 0
      let bestLoss = Infinity
      for (let i = 0; i + 1 < parts.length; i++) {
        const loss = (fill(parts[i]!) - fill(parts[i + 1]!)) * parts[i]!.burst
        if (loss < bestLoss) {
          bestLoss = loss
          best = i
        }
      }
      merge(parts, best, fill(parts[best + 1]!))
    }
  }

  #tokensAt(ms: number): number {
    let t = this.excess > 0 ? Math.max(0, this.excess - ms * this.#excessGoesPerMs) : 0
    for (const p of this.#parts) t += Math.min(p.burst, p.tokens + ms * p.ratePerMs)
    return t
  }

  #noExcess(): void {
    this.excess = 0
    this.#excessGoesPerMs = 0
  }
}

/** Parts `i` and `i + 1` as one, at `fillOf` (the lower fill: nothing invented). */
function merge(parts: Part[], i: number, fillOf: number): void {
  const a = parts[i]!
  const b = parts[i + 1]!
  // Earning from the later of the two: never earlier than either would.
  if (a.earnsFromMs > b.earnsFromMs) b.earnsFromMs = a.earnsFromMs
  b.burst += a.burst
  b.ratePerMs += a.ratePerMs
  b.tokens = fillOf * b.burst
  parts.splice(i, 1)
}
