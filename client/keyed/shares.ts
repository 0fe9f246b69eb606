import {
  fastestRefillMs,
  keyLimits,
  kindTraits,
  preciseNow,
  safeFallback,
  slowestRefillMs,
  type Clock,
  type KindTraits,
  type LeaseGrant,
  type ResourceKind,
} from '../../shared/index.js'

const emptyCharges: ReadonlyMap<string, number> = new Map()

/** Moves of the default share remembered for keys refreshed late (`movesSince`). */
const keptMoves = 16

/** Rate handovers remembered as taken (a lease repeats one only until it is acknowledged). */
const keptHandedIds = 64

/** The default share's moves since a key's bucket was last set (`FamilyShares.movesSince`). */
export interface ShareMoves {
  /** The lowest share in force since (the one the bucket was set for not counted). */
  lowShare: number
  /** When the first move came, and the last (hot clock). */
  firstAtMs: number
  lastAtMs: number
}

/**
 * What a keyed family's lease says every key may use in this process: the
 * default share (a fraction of each key's limits), its fallback, the kind
 * of the keys and their limits (the family's, and the plan's), and for a
 * keyed quota the window the share is of. The per-kind key rules
 * (rate-keys.ts, slot-keys.ts, quota-keys.ts) read it; the family
 * (family.ts) changes it as leases come and lapse.
 */
export class FamilyShares {
  readonly hotClock: Clock
  /** The family lease in force; undefined before the first, or once it lapsed. */
  lease: LeaseGrant | undefined = undefined
  /** The default share in force: the lease's, its fallback while the hold lasts, then 0. */
  share = 0
  fallback = 0
  /** What a new key's bucket holds of the burst at once: the share before its last rise. */
  baseShare = 0
  /** When the share last rose, on the hot clock. */
  increasedAtMs = 0
  /** Bumped whenever the share in force (or the kind) changes: a key refreshes when it sees a new one. */
  epoch = 0
  /** The share's last moves (a ring): the epoch each made, when, and the share it made. */
  readonly #moveEpochs = new Float64Array(keptMoves)
  readonly #moveAtMs = new Float64Array(keptMoves)
  readonly #moveShares = new Float64Array(keptMoves)
  #moves = 0
  readonly #scratch: ShareMoves = { lowShare: 0, firstAtMs: 0, lastAtMs: 0 }
  kind: ResourceKind = 'rate'
  /** What the kind is (kindTraits): how a key is enforced asks here, not the kind's name. */
  traits: KindTraits = kindTraits.rate
  /** The family's limit of a key not in the plan, as one object (read per request by the HTTP edge). */
  defaultLimits: { readonly capacity: number; readonly burst: number } = { capacity: 0, burst: 0 }
  plan: Readonly<Record<string, { capacity: number; burst: number }>> = {}
  /** Quota: the family lease's window, and when spending its default share ends (hot clock). */
  windowIndex = Number.NaN
  windowEndAtMs = 0
  windowLengthMs = 0
  /**
   * Quota: the default share of the next window, sent ahead with the lease of this one
   * (server/pool/ahead.ts): its window (NaN: none), the share, and when spending it starts and
   * ends (hot clock). In force from its start (`advance`); between this window's end and that
   * start a key's check is spent of both (client/keyed/quota-keys.ts, `take`).
   */
  nextIndex = Number.NaN
  nextShare = 0
  nextStartAtMs = 0
  nextEndAtMs = 0
  /**
   * Quota: the share in force came ahead, and no lease of its window has come yet: a key
   * leased on its own in an earlier window waits for its lease of this one (it comes with the
   * share's first lease of the window), and spends none of the share meanwhile.
   */
  aheadInForce = false
  refreshMs = 1000
  /**
   * Quota: units of keys that other processes spent of a share handed on to this one
   * (`inherit`, server/pool/handover.ts), in window `#chargesWindow`: counted spent here.
   */
  readonly #charges = new Map<string, number>()
  #chargesWindow = Number.NaN
  /** The handovers counted in `#chargesWindow`: each once, however often a lease says it. */
  readonly #chargedIds = new Set<string>()

  /** The rate handovers taken (`handed`): each once, however often a lease says it. */
  readonly #handedIds = new Set<string>()
  /**
   * A fall's gift to this process's first share (`handed` with `goesAtShare`): what a key never
   * seen here holds above its burst, as a share of it, at `#giftAtMs`, going at `#giftGoesAtShare`
   * of each key's rate, as the faller's excess would have.
   */
  #giftLevel = 0
  #giftAtMs = 0
  #giftGoesAtShare = 0

  constructor(hotClock: Clock) {
    this.hotClock = hotClock
  }

  /** A key's limits: the plan's, else the family's (shared/lease-math.ts, as config/resolve.ts). */
  keyLimits(key: string): { capacity: number; burst: number } {
    return keyLimits(this.plan, key, this.defaultLimits)
  }

  /**
   * What a key never seen here holds now of its burst, as a share: what it started with at the
   * last rise, plus what the rise's fresh part earned since at the slowest key's refill (never
   * more than the share). One fraction for every key: a key that refills faster earns more
   * than this says.
   */
  earnedShare(nowMs: number): number {
    const refillMs = slowestRefillMs(this.defaultLimits, this.plan)
    const risen = Math.max(0, this.share - this.baseShare)
    const earned =
      refillMs > 0 ? (risen * Math.max(0, nowMs - this.increasedAtMs)) / refillMs : risen
    return Math.min(this.share, this.baseShare + earned)
  }

  /** The keys are of `kind` (a family lease says so, or a key's lease before one); true when that changed. */
  setKind(kind: ResourceKind): boolean {
    if (kind === this.kind) return false
    this.kind = kind
    this.traits = kindTraits[kind]
    this.epoch++
    return true
  }

  /**
   * A family lease's share comes in force; true when the share changed. A key first asked for
   * after this starts with what the old share held of its burst, plus what the new one has
   * earned since: capacity that moved here brings no burst with it (the process it came from
   * may have spent it just before), so the bound capacity·t + burst holds across the move.
   */
  applyLease(grant: LeaseGrant, family: NonNullable<LeaseGrant['family']>): boolean {
    this.setKind(family.kind)
    // A lease of a window that ended here (its next one came ahead and is in force) says
    // nothing of the share in force: what it gave of that window is already here.
    if (grant.window !== undefined && grant.window.index < this.windowIndex) {
      this.refreshMs = grant.refreshMs
      return false
    }
    if (
      this.defaultLimits.capacity !== family.capacity ||
      this.defaultLimits.burst !== family.burst
    )
      this.defaultLimits = Object.freeze({ capacity: family.capacity, burst: family.burst })
    this.plan = family.plan ?? {}
    this.lease = grant
    const changed = this.share !== grant.capacity
    // A fall keeps what a new key started with before it (never more): the share may have risen
    // just before, and what it had not yet earned is not earned by falling (a rise to 1/2 and a
    // fall to 1/3 a moment later started new keys with a third of their burst at once, while
    // the process the capacity came from may have spent it).
    const nowMs = this.hotClock.now()
    if (grant.full === true) {
      // Nobody could enforce any key of the family for a burst's refill before this lease
      // (server/pool/lease-out.ts, quietFor): every key starts full of this share.
      this.baseShare = grant.capacity
      this.increasedAtMs = nowMs
    } else if (grant.fill !== undefined && grant.capacity > this.share) {
      // Part of the burst was free (a first share, lease-out.ts's firstShareFill): a key starts
      // with that part (or what it had earned, if more) and earns the rest of the share.
      this.baseShare = Math.min(grant.capacity, Math.max(grant.fill, this.earnedShare(nowMs)))
      this.increasedAtMs = nowMs
    } else if (grant.capacity > this.share) {
      // A rise: a new key starts with what it had earned of the share before it, no more.
      this.baseShare = this.earnedShare(nowMs)
      this.increasedAtMs = nowMs
    } else if (grant.capacity < this.share) {
      // A fall: what it had earned is kept (never above the new share), and the rest of the
      // share earns from now. (Kept without moving the time it earns from, a renewal or a fall
      // counted the time since the rise twice: a process's keys never seen started with a
      // token more than they had earned, 3 where 2 were, past the central bucket; found by
      // the family model holding the buckets to it.)
      this.baseShare = Math.min(this.earnedShare(nowMs), grant.capacity)
      this.increasedAtMs = nowMs
    }
    // The same share again (a renewal): a new key's level goes on as it was.
    this.share = grant.capacity
    this.fallback = safeFallback(grant)
    this.refreshMs = grant.refreshMs
    // A window's number never goes back here (QuotaEnforcer.window says why).
    if (grant.window !== undefined && !(grant.window.index < this.windowIndex)) {
      if (grant.window.index !== this.windowIndex && this.#chargesWindow < grant.window.index) {
        this.#charges.clear()
        this.#chargedIds.clear()
        this.#chargesWindow = Number.NaN
      }
      this.windowIndex = grant.window.index
      this.windowEndAtMs = this.hotClock.now() + grant.window.endsInMs
      this.windowLengthMs = grant.window.lengthMs
      this.aheadInForce = false
      const next = grant.window.next
      if (next !== undefined && next.index > grant.window.index) {
        this.nextIndex = next.index
        this.nextShare = next.capacity
        // A start must not come early: placed from the real time, not the hot clock's reading,
        // which lags it (by a tick, more when the event loop is late: a fault run saw processes
        // open the next window 6-26 ms before its edge). An end is placed from the reading.
        this.nextStartAtMs = preciseNow(this.hotClock) + next.startsInMs
        this.nextEndAtMs = nowMs + next.endsInMs
      } else if (!(this.nextIndex > grant.window.index)) this.nextIndex = Number.NaN
    }
    this.epoch++
    if (changed) this.#moved(nowMs)
    return changed
  }

  /**
   * Quota: the next window's share sent ahead comes in force once its start is reached here
   * (`nowMs`, hot clock): the window, its share and its end are that one's, its charges none
   * yet. True when it did.
   */
  advance(nowMs: number): boolean {
    if (!(this.nextIndex > this.windowIndex) || nowMs < this.nextStartAtMs) return false
    this.#charges.clear()
    this.#chargedIds.clear()
    this.#chargesWindow = Number.NaN
    this.windowIndex = this.nextIndex
    this.windowEndAtMs = this.nextEndAtMs
    this.nextIndex = Number.NaN
    this.aheadInForce = true
    const changed = this.share !== this.nextShare
    this.share = this.nextShare
    this.baseShare = Math.min(this.baseShare, this.share)
    this.epoch++
    if (changed) this.#moved(nowMs)
    return true
  }

  /**
   * The default share's moves since the bucket of a key was set at `epoch`: null when it did
   * not move; undefined when moves since then are no longer remembered.
   */
  movesSince(epoch: number): ShareMoves | null | undefined {
    const first = this.#moves - keptMoves
    let found = false
    const m = this.#scratch
    for (let i = this.#moves - 1; i >= 0 && i >= first; i--) {
      const j = i % keptMoves
      if (!(this.#moveEpochs[j]! > epoch)) return found ? m : null
      if (!found) {
        found = true
        m.lowShare = this.#moveShares[j]!
        m.lastAtMs = this.#moveAtMs[j]!
      } else if (this.#moveShares[j]! < m.lowShare) m.lowShare = this.#moveShares[j]!
      m.firstAtMs = this.#moveAtMs[j]!
    }
    // Every remembered move is since: those before them are too, unless there were none.
    return first <= 0 ? (found ? m : null) : undefined
  }

  #moved(nowMs: number): void {
    const j = this.#moves % keptMoves
    this.#moveEpochs[j] = this.epoch
    this.#moveAtMs[j] = nowMs
    this.#moveShares[j] = this.share
    this.#moves++
  }

  /**
   * A share handed on (handover `id`) came with what its leaver spent of these keys in
   * `window`: spent here too, once. False when this handover was counted already.
   */
  charge(window: number, keys: readonly (readonly [string, number])[], id: string): boolean {
    if (window !== this.#chargesWindow) {
      this.#charges.clear()
      this.#chargedIds.clear()
      this.#chargesWindow = window
    }
    if (this.#chargedIds.has(id)) return false
    this.#chargedIds.add(id)
    for (const [key, units] of keys) this.#charges.set(key, (this.#charges.get(key) ?? 0) + units)
    return true
  }

  /** Units of `key` that count as spent here in `window` before this process spent any. */
  chargeOf(key: string, window: number): number {
    return window === this.#chargesWindow ? (this.#charges.get(key) ?? 0) : 0
  }

  /** The charged keys of `window` (for a release: what this share has spent includes them). */
  chargedIn(window: number): ReadonlyMap<string, number> {
    return window === this.#chargesWindow ? this.#charges : emptyCharges
  }

  /** A rate share handed on (`handed`, id): true the first time, false when taken already. */
  takeHanded(id: string): boolean {
    if (this.#handedIds.has(id)) return false
    // A lease repeats a handover only until it is acknowledged: the last few ids are enough.
    if (this.#handedIds.size >= keptHandedIds) this.#handedIds.clear()
    this.#handedIds.add(id)
    return true
  }

  /** What a key never seen here holds now of its burst, as a share (a rate family's). */
  untrackedLevel(): number {
    return this.earnedShare(this.hotClock.now())
  }

  /** A key never seen here starts with `level` more of its burst (a share handed on), never above the share. */
  raiseBase(level: number): void {
    this.baseShare = Math.min(this.share, this.baseShare + level)
  }

  /**
   * A fall's gift: a key never seen here holds `level` more of its burst above it, going at
   * `goesAtShare` of its rate until none is left (client/keyed/limit-keys.ts puts it in its
   * bucket as an excess: TokenBucket.addExcess). One per family: it takes a gift only with its
   * first share, and a second is dropped (nothing is made by dropping).
   */
  handGift(level: number, goesAtShare: number): void {
    if (!(level > 0) || !(goesAtShare > 0) || this.#giftLevel > 0) return
    this.#giftLevel = level
    this.#giftGoesAtShare = goesAtShare
    this.#giftAtMs = this.hotClock.now()
  }

  /**
   * A fall of `fraction` of the share for a joiner passes that part of the gift on (the rest
   * goes on here at the rest of its rate): returns the level given, as a share of every key's
   * burst (what is left of it at the fastest key's pace, which is below every key's), and the
   * share of each key's rate it goes at. None: 0, 0.
   */
  splitGift(fraction: number): [number, number] {
    if (!(this.#giftLevel > 0) || !(fraction > 0)) return [0, 0]
    const part = Math.min(1, fraction)
    const refillMs = fastestRefillMs(this.defaultLimits, this.plan)
    const sinceMs = Math.max(0, this.hotClock.now() - this.#giftAtMs)
    const left =
      refillMs > 0 ? Math.max(0, this.#giftLevel - (this.#giftGoesAtShare * sinceMs) / refillMs) : 0
    const goesAtShare = this.#giftGoesAtShare * part
    this.#giftLevel *= 1 - part
    this.#giftGoesAtShare -= goesAtShare
    return left > 0 ? [left * part, goesAtShare] : [0, 0]
  }

  /**
   * What of a fall's gift a key of these limits never seen here holds above its burst now: the
   * tokens, and the rate they go at per second (none: 0, 0).
   */
  giftOf(
    limits: { readonly capacity: number; readonly burst: number },
    nowMs: number,
  ): [number, number] {
    if (!(this.#giftLevel > 0) || !(limits.burst > 0)) return [0, 0]
    const goesPerSec = this.#giftGoesAtShare * limits.capacity
    const tokens =
      this.#giftLevel * limits.burst - (goesPerSec * Math.max(0, nowMs - this.#giftAtMs)) / 1000
    return tokens > 0 ? [tokens, goesPerSec] : [0, 0]
  }

  /** The lease ran out unrenewed: its fallback for the hold. */
  lapse(): void {
    this.lease = undefined
    const changed = this.share !== this.fallback
    this.share = this.fallback
    this.baseShare = Math.min(this.baseShare, this.share)
    this.epoch++
    if (changed) this.#moved(this.hotClock.now())
  }

  /** Nothing any more: the hold ended, or another process took the id over. */
  clear(): void {
    this.lease = undefined
    const changed = this.share !== 0
    this.share = 0
    this.fallback = 0
    this.baseShare = 0
    this.#giftLevel = 0
    this.epoch++
    if (changed) this.#moved(this.hotClock.now())
  }
}
