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
 * held above the new burst, as a release does (client/keyed/family.ts): of every key not named,
 * `level` of its burst; of each named key, its tokens. The pool keeps each gift (`add`) with the
 * share that fell (`fell`), from when the fall was sent, and the joiner's first share takes what
 * is left of them (`take`). A gift is the faller's excess moved: it goes as that excess would
 * have gone, at the rate that fell (`fell` of each key's rate), from its value down to nothing.
 *
 * How the joiner holds it depends on whether its rise is the one the falls were made for
 * (`paired`: no rise took the rate the falls freed since). Paired, the tokens move with the rate,
 * as a named rate's fall hands its excess to the rise it pays for: the joiner's buckets start
 * from them, as tokens of its share (a raised level: client/keyed/shares.ts, raiseBase), and
 * refill as any part does. Unpaired (another share rose into that rate meanwhile, and its fresh
 * part pays for the falls' excess), they are an excess at the joiner: above its bursts, spent
 * first, going at that rate (`goesAtShare`: TokenBucket.addExcess), never refilled.
 *
 * Why it is safe (test/server/pool/burst-slack.test.ts, 'fallGive' and 'firstTake'): tokens
 * move, none are made, and where they are they go as they would have gone at the faller, or
 * with the rate they belong to. Held as a full part of the joiner's burst after another share
 * rose into the falls' rate, a gift refilled where the faller's excess would have gone: 100.029
 * of 100 at seed 58248383 (a share rose between the fall and the take). Going over a
 * whole refill time from its value, not at the rate that fell, a small gift outlived the
 * faller's excess (100.019 of 100). The level goes at the fastest key's pace (`levelRefillMs`),
 * which is below every key's line; a named key at its own. Two joiners share a gift in
 * proportion, each part at least at its proportion of the rate. Gifts outliving what the bound
 * cannot see are dropped (BurstSlack.disturb: `clear`).
 *
 * Pure: the pool gives it the time.
 */
export class FallGifts {
  readonly #levelRefillMs: number
  readonly #gifts: Gift[] = []
  /**
   * The share that the gifts' falls freed and no rise has taken since (falls add, rises take;
   * never below 0): while a joiner's share fits in it, the joiner's rise is the one the falls
   * were made for, and nothing else earns their rate (`take`'s `paired`).
   */
  #freeShare = 0

  /** @param levelRefillMs the family's fastest key's refill time: a level goes at least at its pace for every key */
  constructor(levelRefillMs: number) {
    this.#levelRefillMs = levelRefillMs
  }

  /** Whether any gift waits. */
  get size(): number {
    return this.#gifts.length
  }

  /**
   * A fall of `fell` (a share) gave `level` of every key's burst, less for the keys named (their
   * tokens), at `atMs` (when the fall was sent): both already capped at the fall's share by the
   * caller.
   */
  add(
    level: number,
    keys: readonly (readonly [string, number])[],
    fell: number,
    atMs: number,
  ): void {
    if (!(fell > 0)) return
    if (!(level > 0) && !keys.some(([, n]) => n > 0)) return
    const gifts = this.#gifts
    // Bounded: the oldest, least left of, goes first.
    if (gifts.length >= maxGifts) gifts.shift()
    gifts.push({ level, keys: new Map(keys), fell, atMs })
    this.#freeShare = Math.min(1, this.#freeShare + fell)
  }

  /** The leases rose by `share` (BurstSlack.hold): it takes of what the falls freed. */
  rose(share: number): void {
    this.#freeShare = Math.max(0, this.#freeShare - share)
  }

  /** Nothing is given any more (anything may be held unseen: BurstSlack.disturb). */
  clear(): void {
    this.#gifts.length = 0
    this.#freeShare = 0
  }

  /**
   * A joiner's first share of `share` takes what is left of every gift now, never above the
   * share: `level` of every key's burst, and the keys that get less, with their tokens (at most
   * `maxKeys`: past that, the level is 0 and the keys holding most are named), going at
   * `goesAtShare` of each key's rate. Undefined when nothing is left. What it does not take
   * stays for the next joiner (two joining in one round share what one fall gave): each gift
   * keeps its part of what is left, going at its part of the rate.
   */
  take(
    share: number,
    limitsOf: (key: string) => { readonly capacity: number; readonly burst: number },
    maxKeys: number,
    nowMs: number,
  ): { level: number; keys: [string, number][]; goesAtShare: number; paired: boolean } | undefined {
    const gifts = this.#gifts
    if (gifts.length === 0) return undefined
    // Paired: no rise took the falls' rate since they were made, so this share's rise (it comes
    // next) is the one they were made for, and the tokens may move with the rate, as a named
    // rate's fall hands its excess to the rise it pays for (BurstSlack's 'move').
    const paired = share <= this.#freeShare + 1e-9
    const sinceMs = (g: Gift): number => Math.max(0, nowMs - g.atMs)
    // The level each gift holds now, on the fastest key's line.
    const levelRefillMs = this.#levelRefillMs
    const levels = gifts.map((g) =>
      levelRefillMs > 0 ? Math.max(0, g.level - (g.fell * sinceMs(g)) / levelRefillMs) : 0,
    )
    let all = 0
    for (const l of levels) all += l
    let level = Math.min(share, all)
    const named = new Set<string>()
    for (const g of gifts) for (const k of g.keys.keys()) named.add(k)
    // Each named key: what each gift holds of it now (named, or the level, on its own line).
    const given: { key: string; of: number[]; tokens: number; burst: number }[] = []
    let keys: [string, number][] = []
    for (const k of named) {
      const { capacity, burst } = limitsOf(k)
      const of = gifts.map((g) =>
        Math.max(0, (g.keys.get(k) ?? g.level * burst) - (g.fell * capacity * sinceMs(g)) / 1000),
      )
      let tokens = 0
      for (const n of of) tokens += n
      given.push({ key: k, of, tokens, burst })
      const taken = Math.min(tokens, share * burst)
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
    // What part of each gift is taken: of the level, and of each named key (all of a key that
    // gets the level, when the level is all it had; none of one left unnamed past maxKeys).
    const levelPart = all > 0 ? level / all : 1
    const takenOf = new Map(keys)
    const parts = new Map<string, number>()
    let most = levelPart
    let least = levelPart
    for (const g of given) {
      const taken = takenOf.get(g.key) ?? level * g.burst
      const part = g.tokens > 0 ? Math.min(1, taken / g.tokens) : 1
      parts.set(g.key, part)
      if (part > most) most = part
      if (part < least) least = part
    }
    // The rest stays, each gift's own, from now, going at its part of the rate (at least).
    let goesAtShare = 0
    const rest: Gift[] = []
    for (let i = 0; i < gifts.length; i++) {
      const g = gifts[i]!
      const restKeys: [string, number][] = given.map((k) => [
        k.key,
        k.of[i]! * (1 - parts.get(k.key)!),
      ])
      const held = levels[i]! > 0 || given.some((k) => k.of[i]! > 0)
      if (held) goesAtShare += g.fell
      const restLevel = levels[i]! * (1 - levelPart)
      if (restLevel > 0 || restKeys.some(([, n]) => n > 0))
        rest.push({
          level: restLevel,
          keys: new Map(restKeys),
          fell: g.fell * (1 - least),
          atMs: nowMs,
        })
    }
    gifts.length = 0
    gifts.push(...rest)
    if (!(level > 0) && !keys.some(([, n]) => n > 0)) return undefined
    return { level, keys, goesAtShare: goesAtShare * most, paired }
  }
}

interface Gift {
  readonly level: number
  readonly keys: ReadonlyMap<string, number>
  /** The share that fell: its excess went at this share of each key's rate. */
  readonly fell: number
  readonly atMs: number
}

/** Gifts kept at most per family (one per fall acknowledged while a joiner waits). */
const maxGifts = 64
