import type { KeySpent, KeyedFamily } from '../../client/index.js'
import { domainLimits } from '../../shared/index.js'

/**
 * The coordinator's own part (central.ts) answers a keyed quota's remote ask admitted only once
 * the ledger holds, for the key and window, a reservation at least what it admitted
 * (server/pool/central-spend.ts): a coordinator that dies takes its part's counts with it, and
 * the next one frees the dead part's share less what was reserved, never less than it spent.
 *
 * Reserved ahead, by what the key is admitted in `aheadMs` at its pace (`aheadShare` of its
 * budget at least), and the next window's first part (what it was admitted in its first
 * `aheadMs` here) with its admissions in a window, so most answers find their units written
 * already and go at once. What is reserved ahead rides with the next ledger write, whatever
 * makes it (the leases' writes come several times a second); an answer waits, asking for a
 * write of its own (group-committed with the leases), only when its key's admissions outran
 * what is written: a key new to the part in a window, or one spent faster than the writes
 * come. What a restart loses is at most what was reserved and not spent: about `aheadMs` of
 * each key's spending at the part, and `aheadShare` of the budget of each key it touched.
 */

/** Of a key's budget, what is reserved beyond what was admitted at least (and one unit). */
export const aheadShare = 1 / 25

/**
 * Beyond that, what the key is admitted in this long at its pace in the window: a key spent
 * fast (a hot key's budget goes in the first second of its window) is reserved ahead as fast,
 * so its answers do not outrun the writes (a round's writes at an edge take hundreds of ms
 * over thousands of hot keys). What a restart loses grows with it: about this long of each
 * key's spending.
 */
export const aheadMs = 1000

/** A pace is measured over this much at least (a key's first admissions say little of it). */
const minPaceMs = 250

/** What the central part of each tenant's families needs of the coordinator. */
export interface ReserveHost {
  /** Raises the pool's reservation of keys of `familyId` for `tenant`'s part: false when it holds no share. */
  reserve(
    tenant: string | undefined,
    familyId: string,
    window: number,
    keys: readonly (readonly [string, number])[],
  ): boolean
  /** Writes what the pool changed, then calls `then`: durable (true), or its write failed (false). */
  afterWrite(then: (ok: boolean) => void): void
  /** Calls `then` once the next write, whatever asks for it, is done: it holds what the pool changed. */
  withNextWrite(then: (ok: boolean) => void): void
  /**
   * The part admitted more keys of `familyId` in `window` than a release may say: the pool's
   * reservations there say only that (its share of the window stays spent if it dies); false
   * when it holds no share.
   */
  full(tenant: string | undefined, familyId: string, window: number): boolean
}

/**
 * One key in one window: units admitted, reserved (asked to be written), and written; when its
 * first unit was admitted, and the units admitted within `aheadMs` of it (the next window's
 * first reservation).
 */
interface Count {
  admitted: number
  target: number
  durable: number
  sinceMs: number
  early: number
  /**
   * A window past `maxSpentKeys` keys: one count for all its keys, admitted 1 and durable 1
   * once the pool's mark of it is written (its answers wait for that alone).
   */
  full?: true
}

/** A write in flight: the counts it carries, at their targets then; answers waiting for it. */
interface Write {
  readonly counts: [Count, number][]
  readonly waiting: ((ok: boolean) => void)[]
  ok: boolean
  /** Written (at once, without a ledger or with a synchronous one): `ok` is its outcome. */
  done: boolean
}

/** One tenant's part of one family: per window, per key. */
class FamilyCounts {
  readonly windows = new Map<number, Map<string, Count>>()
  /** Counts raised since the last write, per window. */
  readonly raised = new Map<number, Map<string, Count>>()
  /** Windows past `maxSpentKeys` keys: their one count (no key's is kept). */
  readonly full = new Map<number, Count>()
  /** Full windows whose mark goes with the next write. */
  readonly raisedFull = new Set<number>()
  newest = -Infinity

  constructor(
    readonly tenant: string | undefined,
    readonly familyId: string,
  ) {}

  /** `c` (of `key` in `window`) goes with the next write. */
  raise(window: number, key: string, c: Count): void {
    let raised = this.raised.get(window)
    if (raised === undefined) this.raised.set(window, (raised = new Map<string, Count>()))
    raised.set(key, c)
  }

  /** `key`'s count in `window`, made if new; a full window's one count (made past the bound). */
  count(window: number, key: string): Count {
    if (window > this.newest) {
      this.newest = window
      // This window and the one before (its last checks may still be answered).
      for (const w of this.windows.keys()) if (w < window - 1) this.windows.delete(w)
      for (const w of this.full.keys()) if (w < window - 1) this.full.delete(w)
    }
    const full = this.full.get(window)
    if (full !== undefined) return full
    let keys = this.windows.get(window)
    if (keys === undefined) this.windows.set(window, (keys = new Map<string, Count>()))
    let c = keys.get(key)
    if (c === undefined) {
      if (keys.size >= domainLimits.maxSpentKeys) {
        // More keys than a release may say: the pool keeps none of them (it could not vouch for
        // the window), and neither does this.
        this.windows.delete(window)
        this.raised.delete(window)
        c = { admitted: 1, target: 0, durable: 0, sinceMs: Number.NaN, early: 0, full: true }
        this.full.set(window, c)
        return c
      }
      keys.set(key, (c = { admitted: 0, target: 0, durable: 0, sinceMs: Number.NaN, early: 0 }))
    }
    return c
  }

  /** Raises a full window's mark (`c`) when it is neither written nor going to be. */
  raiseFull(window: number, c: Count): void {
    if (c.target > c.durable || c.durable >= 1) return
    c.target = 1
    this.raisedFull.add(window)
  }
}

export class SpendReserve {
  readonly #host: ReserveHost
  readonly #families = new Map<string, FamilyCounts>()
  readonly #before: KeySpent = { window: Number.NaN, used: 0, nextWindow: -1, nextUsed: 0 }
  readonly #after: KeySpent = { window: Number.NaN, used: 0, nextWindow: -1, nextUsed: 0 }
  /** Writes in flight, oldest first (they complete in order). */
  readonly #writes: Write[] = []

  constructor(host: ReserveHost) {
    this.#host = host
  }

  /** Before a remote ask of a keyed quota's key is tried: what the key had spent. */
  before(family: KeyedFamily, key: string): void {
    family.spentOf(key, this.#before)
  }

  /**
   * After an ask was admitted: counts what it spent of each window, and raises their
   * reservations (ahead by `aheadShare`). True when its answer must wait for a write.
   */
  admitted(tenant: string | undefined, family: KeyedFamily, key: string, nowMs: number): boolean {
    const a = family.spentOf(key, this.#after)
    const b = this.#before
    const counts = this.#familyOf(tenant, family.familyId)
    const budget = family.limitOf(key).capacity
    const chunk = Math.max(1, Math.ceil(budget * aheadShare))
    let waits = false
    if (!Number.isNaN(a.window)) {
      // Its budget's window: what was spent of it before (carried in from ahead, if it opened).
      const had = a.window === b.window ? b.used : a.window === b.nextWindow ? b.nextUsed : 0
      const c = this.#note(counts, a.window, key, a.used - had, chunk, budget, nowMs)
      waits = (c !== undefined && c.admitted > c.durable) || waits
      // The next window's first reservation: what the key was admitted in its first `aheadMs`
      // here, a chunk at least, so its first answers there do not wait for a write (at an edge
      // every key starts anew at once, with the round's writes in the way).
      if (c !== undefined) {
        const next = counts.count(a.window + 1, key)
        const first = Math.min(budget, Math.max(chunk, c.early))
        if (next.full === true) counts.raiseFull(a.window + 1, next)
        else if (next.target < first) {
          next.target = first
          counts.raise(a.window + 1, key, next)
        }
      }
    }
    if (a.nextWindow >= 0) {
      const had = a.nextWindow === b.nextWindow ? b.nextUsed : 0
      const c = this.#note(counts, a.nextWindow, key, a.nextUsed - had, chunk, budget, nowMs)
      waits = (c !== undefined && c.admitted > c.durable) || waits
    }
    return waits
  }

  /**
   * Sends what was raised to the ledger, and `send`s the answers: at once when nothing of
   * theirs waits (`waits` false), else once the write that covers them is durable; told false
   * when it failed (the answers then refuse: the units stay counted at the part).
   */
  settle(waits: boolean, send: (ok: boolean) => void): void {
    // Reserved ahead only: with the next write, whatever makes it. An answer that waits asks
    // for one (it carries whatever was reserved before, and comes after every earlier write).
    const write = this.#write(waits)
    if (!waits) return send(true)
    const covering = write ?? this.#write(true, true)!
    if (covering.done) return send(covering.ok)
    covering.waiting.push(send)
  }

  #familyOf(tenant: string | undefined, familyId: string): FamilyCounts {
    const name = `${tenant ?? ''}\u0000${familyId}`
    let counts = this.#families.get(name)
    if (counts === undefined)
      this.#families.set(name, (counts = new FamilyCounts(tenant, familyId)))
    return counts
  }

  /** Counts `units` admitted of `key` in `window` (its count; undefined when none were). */
  #note(
    counts: FamilyCounts,
    window: number,
    key: string,
    units: number,
    chunk: number,
    budget: number,
    nowMs: number,
  ): Count | undefined {
    if (!(units > 0)) return undefined
    const c = counts.count(window, key)
    if (c.full === true) {
      counts.raiseFull(window, c)
      return c
    }
    if (Number.isNaN(c.sinceMs)) c.sinceMs = nowMs
    c.admitted += units
    const sinceMs = nowMs - c.sinceMs
    if (sinceMs < aheadMs) c.early = c.admitted
    // Less than half of what is reserved ahead left: reserve ahead again, a chunk or what the
    // key is admitted in `aheadMs` at its pace.
    // Never past the key's budget (what it could not admit anyway).
    const ahead = Math.max(chunk, Math.ceil((c.admitted * aheadMs) / Math.max(minPaceMs, sinceMs)))
    const target = Math.min(Math.max(budget, c.admitted), c.admitted + ahead)
    if (c.admitted > c.target - ahead / 2 && target > c.target) {
      c.target = target
      counts.raise(window, key, c)
    }
    return c
  }

  /**
   * A write of every count raised since the last (asked for when `force`, else with the next
   * one), or undefined when none was; `always`: one even of nothing (it comes after the rest).
   */
  #write(force: boolean, always = false): Write | undefined {
    let write: Write | undefined = always
      ? { counts: [], waiting: [], ok: true, done: false }
      : undefined
    for (const counts of this.#families.values()) {
      if (counts.raised.size === 0 && counts.raisedFull.size === 0) continue
      write ??= { counts: [], waiting: [], ok: true, done: false }
      for (const window of counts.raisedFull) {
        const c = counts.full.get(window)
        if (c === undefined) continue
        write.counts.push([c, c.target])
        if (!this.#host.full(counts.tenant, counts.familyId, window)) write.ok = false
      }
      counts.raisedFull.clear()
      for (const [window, raised] of counts.raised) {
        const keys: [string, number][] = []
        for (const [key, c] of raised) {
          keys.push([key, c.target])
          write.counts.push([c, c.target])
        }
        if (!this.#host.reserve(counts.tenant, counts.familyId, window, keys)) write.ok = false
      }
      counts.raised.clear()
    }
    if (write === undefined) return undefined
    this.#writes.push(write)
    const then = (ok: boolean): void => this.#written(write, ok && write.ok)
    if (force) this.#host.afterWrite(then)
    else this.#host.withNextWrite(then)
    return write
  }

  #written(write: Write, ok: boolean): void {
    write.done = true
    write.ok = ok
    const i = this.#writes.indexOf(write)
    if (i >= 0) this.#writes.splice(i, 1)
    for (const [c, target] of write.counts)
      if (ok) c.durable = Math.max(c.durable, target)
      // Not written: raised again at the next admission.
      else c.target = Math.min(c.target, c.durable)
    for (const send of write.waiting) send(ok)
  }
}
