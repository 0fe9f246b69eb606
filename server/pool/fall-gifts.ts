/**
 * What falls of a rate family's default share gave up, kept for the first share of a process
 * that joins. Before, a joiner started every key with what of the burst nobody held
 * (BurstSlack): half of it for the second process, a quarter for the third, and nothing once
 * every share had been out for a refill time, while the processes whose shares fell for it
 * dropped what their buckets held above the new bursts ("100 per minute" with three gateways
 * started a hot key's buckets with 50, 24 and 12 of its burst of 100; the sixth gateway
 * joining five started every key empty: docs/benchmarks.md).
 *
 * Now a fall that a joiner waits for (the lease says `handOn`) gives up what the part that fell
 * held, as a release does (client/keyed/family.ts): of every key not named, `level` of its
 * burst; of each named key, its tokens. The pool keeps each gift (`add`), capped at the fall's
 * share, from the ack that says it, and the joiner's first share takes what is left of them
 * (`take`): each gift goes as the fall's excess would have gone (linearly to nothing over the
 * burst's refill time, which is what BurstSlack counts a fall to leave), capped at the share
 * taken; what is not taken waits for the next joiner, going on. The joiner's buckets start from it (a full part of
 * it, the rest of the share earning: `raiseBase`), one part each, never above the share.
 *
 * Why it is safe (test/server/pool/burst-slack.test.ts, 'fallGive' and 'firstTake'): tokens
 * move, none are made. What the fall gave was in a bucket, one part with no excess, before; the
 * pool counts the fallen share from the ack on as a fall that may leave that much above the
 * new bursts, going over a refill time. What waits here is never more than that, so wherever
 * the bound counts it, it is counted. Taken whole, not going meanwhile, the property fails; so
 * it does when a gift outlives what the bound cannot see (BurstSlack.disturb: `clear`).
 *
 * Pure: the pool gives it the time.
 */
export class FallGifts {
  readonly #refillMs: number
  readonly #gifts: Gift[] = []

  /** @param refillMs the burst's refill time (BurstSlack's: a family's slowest key's) */
  constructor(refillMs: number) {
    this.#refillMs = refillMs
  }

  /** Whether any gift waits. */
  get size(): number {
    return this.#gifts.length
  }

  /**
   * A fall gave `level` of every key's burst, less for the keys named (their tokens), now: both
   * already capped at the fall's share by the caller.
   */
  add(level: number, keys: readonly (readonly [string, number])[], nowMs: number): void {
    if (!(level > 0) && !keys.some(([, n]) => n > 0)) return
    const gifts = this.#gifts
    // Bounded: the oldest, least left of, goes first.
    if (gifts.length >= maxGifts) gifts.shift()
    gifts.push({ level, keys: new Map(keys), atMs: nowMs })
  }

  /** Nothing is given any more (anything may be held unseen: BurstSlack.disturb). */
  clear(): void {
    this.#gifts.length = 0
  }

  /**
   * A joiner's first share of `share` takes what is left of every gift now, never above the
   * share: `level` of every key's burst, and the keys that get less, with their tokens (at most
   * `maxKeys`: past that, the level is 0 and the keys holding most are named). Undefined when
   * nothing is left. What it does not take stays for the next joiner (two joining in one round
   * share what one fall gave), as one gift going on the oldest gift's line: from the same
   * value now, it reaches nothing first, so it is never above what the gifts left would be.
   */
  take(
    share: number,
    burstOf: (key: string) => number,
    maxKeys: number,
    nowMs: number,
  ): { level: number; keys: [string, number][] } | undefined {
    const gifts = this.#gifts
    if (gifts.length === 0) return undefined
    const leftOf = (g: Gift): number =>
      Math.max(0, 1 - Math.max(0, nowMs - g.atMs) / this.#refillMs)
    const left = gifts.map(leftOf)
    let all = 0
    for (let i = 0; i < gifts.length; i++) all += gifts[i]!.level * left[i]!
    let level = Math.min(share, all)
    const named = new Set<string>()
    for (const g of gifts) for (const k of g.keys.keys()) named.add(k)
    // Each named key: what every gift leaves of it now, and what this share takes of it.
    const given: [string, number, number][] = []
    let keys: [string, number][] = []
    for (const k of named) {
      const burst = burstOf(k)
      let tokens = 0
      for (let i = 0; i < gifts.length; i++) {
        const g = gifts[i]!
        tokens += (g.keys.get(k) ?? g.level * burst) * left[i]!
      }
      const taken = Math.min(tokens, share * burst)
      given.push([k, tokens, burst])
      // A key given at least the level gets the level: it need not be named.
      if (taken < level * burst - 1e-9) keys.push([k, taken])
    }
    if (keys.length > maxKeys) {
      level = 0
      keys = keys
        .filter(([, n]) => n > 0)
        .sort((a, b) => b[1] - a[1])
        .slice(0, maxKeys)
    }
    // What is left, as one gift on the oldest's line.
    const oldest = gifts.reduce((a, g) => (g.atMs < a.atMs ? g : a))
    const oldestLeft = leftOf(oldest)
    gifts.length = 0
    if (oldestLeft > 0) {
      const takenOf = new Map(keys)
      const rest: [string, number][] = given.map(([k, tokens, burst]) => [
        k,
        Math.max(0, tokens - (takenOf.get(k) ?? level * burst)) / oldestLeft,
      ])
      this.add(Math.max(0, all - level) / oldestLeft, rest, oldest.atMs)
    }
    if (!(level > 0) && !keys.some(([, n]) => n > 0)) return undefined
    return { level, keys }
  }
}

interface Gift {
  readonly level: number
  readonly keys: ReadonlyMap<string, number>
  readonly atMs: number
}

/** Gifts kept at most per family (one per fall acknowledged while a joiner waits). */
const maxGifts = 64
