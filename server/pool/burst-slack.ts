import { FallGifts } from './fall-gifts.js'

/**
 * What of a rate resource's burst nobody may be holding: a lower bound, as a share of the burst,
 * on what one exact central bucket fed the same admissions would hold beyond every token the
 * processes' buckets hold. A lease may start its bucket full (`full`) while this is at least
 * its share, and takes that much of it: across every process and every grant, the tokens out
 * never exceed what the central bucket holds, so the bound capacity·t + burst holds over any
 * interval (docs/allocation.md, "A bucket that starts full").
 *
 * For a keyed family's own resource the bound holds for every key on the default split: each
 * key has its own central bucket, and the default shares hold the same share of each. A hot
 * key that goes back to the default split left its own tokens unknown here (`disturb`).
 *
 * Why it holds. Let v be the central bucket (burst B, rate C) and s = v − Σ tokens the slack.
 * Admissions take from both, so they leave s as it is. The processes' buckets hold at most
 * `held` × B, plus what falls left above their new bursts: an excess that goes at the rate
 * that fell (shared/limiters/bucket-parts.ts), so a fall of f leaves at most f × B, gone
 * linearly within the refill time B ÷ C. While v is below B it refills at C and the buckets at
 * most at `held` × C (an excess earns nothing; a rise is a fresh part earning the rate gained):
 * s grows at least (1 − held) × C. Whenever v is full, s = B − Σ tokens ≥ B × (1 − held −
 * excess). A grant that starts full takes its share of s at once. `#advance` keeps, over each
 * step, the worse of the two cases: grown from the step's start, or from any instant of it at
 * which v may have been full. Until `unknownUntilMs` (a restart's learning, leases of a
 * forgotten state, a hot key gone back) anything counts as held, and all of it as a fall then.
 *
 * What a bucket holds is also bounded by what it started with: a grant that starts with part
 * of its share (`takePart`) or none holds that, plus what it earned since, at most its rate.
 * So beside `held` it keeps T, an upper bound on Σ tokens (what was taken, grown at `held` ÷
 * refill, never above `held` + excess nor 1 − s). Had v been full at some instant of a step,
 * the last such instant τ left s(τ) = 1 − Σ tokens(τ) ≥ 1 − T(τ), and from τ on s grew: so s
 * is at least 1 − T grown to the step's end (the worst τ is the end: T grows at `held` and s
 * at 1 − `held`, in the same refill time). This is what lets a first share that started with
 * half of what was free leave the other half to the next holder, though every share together
 * commits the whole capacity (`held` = 1).
 *
 * Pure: the pool gives it the time.
 */
export class BurstSlack {
  readonly #refillMs: number
  /** What falls gave up for a joiner's first share (fall-gifts.ts): gone with what the bound cannot see. */
  readonly gifts: FallGifts
  /** The bound at `#atMs`, a share of the burst (0..1). */
  #slack = 0
  #atMs: number
  /** The share committed to leases since `#atMs` (Σ committed ÷ capacity). */
  #held = 0
  /** Anything counts as held until then. */
  #unknownUntilMs: number
  /** Falls of `held` in the last refill time: what each may have left above the new bursts. */
  readonly #falls: Fall[] = []
  /** T at `#atMs`: at least what the processes' buckets hold, a share of the burst (1 while unknown). */
  #tokens: number

  /**
   * @param refillMs the burst's refill time (burst ÷ capacity; a family's slowest key's)
   * @param unknownUntilMs until then anything may be held (-Infinity: nothing ever was)
   * @param giftRefillMs the fastest key's refill time (a family's), which its gifts go at the pace of
   */
  constructor(refillMs: number, unknownUntilMs: number, giftRefillMs = refillMs) {
    this.#refillMs = refillMs
    this.gifts = new FallGifts(giftRefillMs)
    this.#unknownUntilMs = unknownUntilMs
    this.#atMs = unknownUntilMs
    this.#tokens = unknownUntilMs > -Infinity ? 1 : 0
    if (!(unknownUntilMs > -Infinity)) this.#slack = 1
  }

  /** The share of the burst a lease may start full with now (a lease of no share more). */
  available(nowMs: number): number {
    this.#advance(nowMs)
    return this.#room(0, nowMs)
  }

  /**
   * A lease of `share`, not yet held here (`hold` comes with its record), starts full now, if
   * the bound allows it: true when it took it.
   */
  take(share: number, nowMs: number): boolean {
    this.#advance(nowMs)
    if (!(share <= this.#room(share, nowMs) + 1e-9)) return false
    this.#slack = Math.max(0, this.#slack - share)
    this.#tokens = Math.min(1, this.#tokens + share)
    return true
  }

  /**
   * A lease of `share`, not yet held here, starts with part of it now: at most `fraction` of
   * what is free. Returns what it took (0..share), which its buckets start with (the rest they
   * earn).
   */
  takePart(share: number, fraction: number, nowMs: number): number {
    this.#advance(nowMs)
    const part = Math.max(0, Math.min(share, this.#room(share, nowMs) * fraction))
    this.#slack = Math.max(0, this.#slack - part)
    this.#tokens = Math.min(1, this.#tokens + part)
    return part
  }

  /**
   * What a lease of `share` more may take now: the bound, and no more than lets the tokens out
   * stay within one burst for as long as what falls left may be held above the bursts. The
   * buckets' parts hold at most what the shares commit (h, this one's included), earning at
   * most that together; what falls left (X) goes, never above its line (`#excessAt`), and part
   * of T. Had T' = T + x tokens been taken, parts holding T' − X and X as large as may be, the
   * parts fill to h while X still holds: h + X over the burst, past a central bucket that may
   * be full. So while the line is above 1 − h, T' must not have filled the parts: T' ≤ 1 − h·Δ
   * (Δ the refills until the line is down to 1 − h), or T' ≤ 1 − h (X can never be more than
   * what T' leaves above the parts). Found by the property at 200,000 runs (100.049 of 100): a
   * joiner took what the bound said was free while a share fallen to 0 still held its excess
   * and another filled.
   */
  #room(share: number, nowMs: number): number {
    const h = Math.min(1, this.#held + share)
    const slack = this.#slack
    if (!(slack > 0)) return 0
    if (this.#excessAt(nowMs) <= 1 - h + 1e-12) return slack
    const refills = (this.#excessDownAt(1 - h, nowMs) - nowMs) / this.#refillMs
    const room = Math.max(1 - h, 1 - h * refills) - this.#tokens
    return Math.max(0, Math.min(slack, room))
  }

  /**
   * When what falls may hold above the bursts (`#excessAt`, decreasing) is first down to `level`,
   * from `nowMs` on: its line is straight between the ends of the falls (and of what was unseen).
   */
  #excessDownAt(level: number, nowMs: number): number {
    const refillMs = this.#refillMs
    const startMs = Math.max(nowMs, this.#unknownUntilMs)
    if (this.#excessAt(startMs) <= level) return startMs
    // The first end at which it is down to `level`, and the last end before it.
    let atMs = Infinity
    const ends = this.#falls
    const unknownEndsMs = this.#unknownUntilMs + refillMs
    if (unknownEndsMs > startMs && this.#excessAt(unknownEndsMs) <= level) atMs = unknownEndsMs
    for (let i = 0; i < ends.length; i++) {
      const endsMs = ends[i]!.atMs + refillMs
      if (endsMs > startMs && endsMs < atMs && this.#excessAt(endsMs) <= level) atMs = endsMs
    }
    if (atMs === Infinity) return Infinity
    let fromMs = startMs
    if (unknownEndsMs > fromMs && unknownEndsMs < atMs) fromMs = unknownEndsMs
    for (let i = 0; i < ends.length; i++) {
      const endsMs = ends[i]!.atMs + refillMs
      if (endsMs > fromMs && endsMs < atMs) fromMs = endsMs
    }
    const from = this.#excessAt(fromMs)
    const to = this.#excessAt(atMs)
    return from > to ? fromMs + ((from - level) / (from - to)) * (atMs - fromMs) : atMs
  }

  /** The leases now commit `share` of the capacity (Σ committed ÷ capacity). */
  hold(share: number, nowMs: number): void {
    if (share === this.#held) return
    this.#advance(nowMs)
    if (share > this.#held) this.gifts.rose(share - this.#held)
    if (share < this.#held) {
      const falls = this.#falls
      if (falls.length >= maxFalls) {
        // Merged the safe way: both, from the later time.
        const [a, b] = falls.splice(0, 2) as [Fall, Fall]
        falls.unshift({ share: a.share + b.share, atMs: Math.max(a.atMs, b.atMs) })
      }
      falls.push({ share: this.#held - share, atMs: Math.max(this.#atMs, nowMs) })
    }
    this.#held = share
  }

  /** Anything may be held until `untilMs` (a hot key gone back to the default split): nothing is free until then. */
  disturb(untilMs: number, nowMs: number): void {
    this.#advance(nowMs)
    this.#slack = 0
    this.#tokens = 1
    this.gifts.clear()
    if (untilMs > this.#unknownUntilMs) this.#unknownUntilMs = untilMs
  }

  /** What falls may still hold above the buckets' bursts at `tauMs`, as a share (1 while unknown). */
  #excessAt(tauMs: number): number {
    const unknownUntilMs = this.#unknownUntilMs
    if (tauMs < unknownUntilMs) return 1
    const refillMs = this.#refillMs
    let excess =
      unknownUntilMs > -Infinity ? Math.max(0, 1 - (tauMs - unknownUntilMs) / refillMs) : 0
    for (const f of this.#falls) excess += f.share * Math.max(0, 1 - (tauMs - f.atMs) / refillMs)
    return excess
  }

  /**
   * The bound at `nowMs`: the worse of growing from `#slack` at (1 − held) ÷ refill, and, for
   * each instant τ of the step at which the central bucket may have been full, 1 − held − the
   * excess at τ, grown from τ on (taken as it is when below 0: a weaker bound, linear between the
   * instants where an excess ends, so those instants and the step's ends are the ones to try),
   * or 1 − T grown over the step when that says more. Nothing allocated: it runs at every change
   * of what the leases commit.
   */
  #advance(nowMs: number): void {
    const fromMs = this.#atMs
    if (!(nowMs > fromMs)) return
    this.#atMs = nowMs
    if (fromMs === -Infinity) return // nothing was ever held before now: all of it is free
    const refillMs = this.#refillMs
    const unknownUntilMs = this.#unknownUntilMs
    const held = this.#held
    // T over the step: grown at `held` from its start, never above what the shares and their
    // falls may hold at its start (the most they hold in it: an excess only goes), nor 1.
    const grownTokens = this.#tokens + (held * (nowMs - fromMs)) / refillMs
    const tokensInStep = Math.min(grownTokens, held + this.#excessAt(fromMs), 1)
    // Had v been full in the step: the worst of its instants, by held and excess...
    let full = Math.min(this.#fullAt(fromMs, nowMs), this.#fullAt(nowMs, nowMs))
    if (unknownUntilMs > fromMs && unknownUntilMs < nowMs)
      full = Math.min(full, this.#fullAt(unknownUntilMs, nowMs))
    const unknownEndsMs = unknownUntilMs + refillMs
    if (unknownEndsMs > fromMs && unknownEndsMs < nowMs)
      full = Math.min(full, this.#fullAt(unknownEndsMs, nowMs))
    const falls = this.#falls
    for (let i = 0; i < falls.length; i++) {
      const endsMs = falls[i]!.atMs + refillMs
      if (endsMs > fromMs && endsMs < nowMs) full = Math.min(full, this.#fullAt(endsMs, nowMs))
    }
    // ... or by T, whichever says more: each bounds s in that case.
    full = Math.max(full, 1 - tokensInStep)
    // v never full in the step: grown from its start.
    this.#slack = Math.max(0, Math.min(this.#slack + this.#grown(fromMs, nowMs), full, 1))
    // T now; and Σ tokens = v − s ≤ 1 − s.
    this.#tokens = Math.min(grownTokens, held + this.#excessAt(nowMs), 1 - this.#slack)
    while (falls.length > 0 && falls[0]!.atMs + refillMs <= nowMs) falls.shift()
  }

  /** What grows from `tauMs` to `nowMs` while the central bucket refills (none while unknown). */
  #grown(tauMs: number, nowMs: number): number {
    const fromMs = tauMs > this.#unknownUntilMs ? tauMs : this.#unknownUntilMs
    if (!(nowMs > fromMs)) return 0
    return ((nowMs - fromMs) / this.#refillMs) * Math.max(0, 1 - this.#held)
  }

  /** The bound had the central bucket been full at `tauMs`, grown to `nowMs`. */
  #fullAt(tauMs: number, nowMs: number): number {
    return 1 - this.#held - this.#excessAt(tauMs) + this.#grown(tauMs, nowMs)
  }
}

interface Fall {
  share: number
  atMs: number
}

/** Falls kept at most; more are merged (both, from the later time). */
const maxFalls = 32
