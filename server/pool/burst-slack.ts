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
 * Pure: the pool gives it the time.
 */
export class BurstSlack {
  readonly #refillMs: number
  /** The bound at `#atMs`, a share of the burst (0..1). */
  #slack = 0
  #atMs: number
  /** The share committed to leases since `#atMs` (Σ committed ÷ capacity). */
  #held = 0
  /** Anything counts as held until then. */
  #unknownUntilMs: number
  /** Falls of `held` in the last refill time: what each may have left above the new bursts. */
  readonly #falls: Fall[] = []

  /**
   * @param refillMs the burst's refill time (burst ÷ capacity; a family's slowest key's)
   * @param unknownUntilMs until then anything may be held (-Infinity: nothing ever was)
   */
  constructor(refillMs: number, unknownUntilMs: number) {
    this.#refillMs = refillMs
    this.#unknownUntilMs = unknownUntilMs
    this.#atMs = unknownUntilMs
    if (!(unknownUntilMs > -Infinity)) this.#slack = 1
  }

  /** The share of the burst a lease may start full with now. */
  available(nowMs: number): number {
    this.#advance(nowMs)
    return this.#slack
  }

  /** A lease of `share` starts full now, if the bound allows it: true when it took it. */
  take(share: number, nowMs: number): boolean {
    this.#advance(nowMs)
    if (!(share <= this.#slack + 1e-9)) return false
    this.#slack = Math.max(0, this.#slack - share)
    return true
  }

  /** The leases now commit `share` of the capacity (Σ committed ÷ capacity). */
  hold(share: number, nowMs: number): void {
    if (share === this.#held) return
    this.#advance(nowMs)
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
   * instants where an excess ends, so those instants and the step's ends are the ones to try).
   * Nothing allocated: it runs at every change of what the leases commit.
   */
  #advance(nowMs: number): void {
    const fromMs = this.#atMs
    if (!(nowMs > fromMs)) return
    this.#atMs = nowMs
    if (fromMs === -Infinity) return // nothing was ever held before now: all of it is free
    const refillMs = this.#refillMs
    const unknownUntilMs = this.#unknownUntilMs
    let bound = this.#slack + this.#grown(fromMs, nowMs)
    bound = Math.min(bound, this.#fullAt(fromMs, nowMs), this.#fullAt(nowMs, nowMs))
    if (unknownUntilMs > fromMs && unknownUntilMs < nowMs)
      bound = Math.min(bound, this.#fullAt(unknownUntilMs, nowMs))
    const unknownEndsMs = unknownUntilMs + refillMs
    if (unknownEndsMs > fromMs && unknownEndsMs < nowMs)
      bound = Math.min(bound, this.#fullAt(unknownEndsMs, nowMs))
    const falls = this.#falls
    for (let i = 0; i < falls.length; i++) {
      const endsMs = falls[i]!.atMs + refillMs
      if (endsMs > fromMs && endsMs < nowMs) bound = Math.min(bound, this.#fullAt(endsMs, nowMs))
    }
    this.#slack = Math.max(0, Math.min(bound, 1))
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
