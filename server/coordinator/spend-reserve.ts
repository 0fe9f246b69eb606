import type { KeySpent, KeyedFamily } from '../../client/index.js'

/**
 * The coordinator's own part (central.ts) answers a keyed quota's remote ask admitted only once
 * the ledger holds, for the key and window, a reservation at least what it admitted
 * (server/pool/central-spend.ts): a coordinator that dies takes its part's counts with it, and
 * the next one frees the dead part's share less what was reserved, never less than it spent.
 *
 * Reserved ahead, by `aheadShare` of the key's budget, so most answers find their units
 * written already and go at once; an answer waits (for one ledger write, group-committed with
 * the leases) only when its key's admissions outran the reservation: a key's first admission
 * in a window, or one spent faster than a write takes. What a restart loses is at most the
 * part reserved and not spent: under `aheadShare` of each key's budget the part touched.
 */

/** Of a key's budget, what is reserved beyond what was admitted (at least one unit). */
export const aheadShare = 1 / 25

/** What the central part of each tenant's families needs of the coordinator. */
export interface ReserveHost {
  /** Raises the pool's reservation of keys of `familyId` for `tenant`'s part: false when it holds no share. */
  reserve(
    tenant: string | undefined,
    familyId: string,
    window: number,
    keys: readonly (readonly [string, number])[],
  ): boolean
  /** Calls `then` once what the pool changed is durable (true), or its write failed (false). */
  afterWrite(then: (ok: boolean) => void): void
}

/** One key in one window: units admitted, reserved (asked to be written), and written. */
interface Count {
  admitted: number
  target: number
  durable: number
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
  newest = -Infinity

  constructor(
    readonly tenant: string | undefined,
    readonly familyId: string,
  ) {}

  count(window: number, key: string): Count {
    if (window > this.newest) {
      this.newest = window
      // This window and the one before (its last checks may still be answered).
      for (const w of this.windows.keys()) if (w < window - 1) this.windows.delete(w)
    }
    let keys = this.windows.get(window)
    if (keys === undefined) this.windows.set(window, (keys = new Map<string, Count>()))
    let c = keys.get(key)
    if (c === undefined) keys.set(key, (c = { admitted: 0, target: 0, durable: 0 }))
    return c
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
  admitted(tenant: string | undefined, family: KeyedFamily, key: string): boolean {
    const a = family.spentOf(key, this.#after)
    const b = this.#before
    const counts = this.#familyOf(tenant, family.familyId)
    const chunk = Math.max(1, Math.ceil(family.limitOf(key).capacity * aheadShare))
    let waits = false
    if (!Number.isNaN(a.window)) {
      // Its budget's window: what was spent of it before (carried in from ahead, if it opened).
      const had = a.window === b.window ? b.used : a.window === b.nextWindow ? b.nextUsed : 0
      waits = this.#note(counts, a.window, key, a.used - had, chunk) || waits
    }
    if (a.nextWindow >= 0) {
      const had = a.nextWindow === b.nextWindow ? b.nextUsed : 0
      waits = this.#note(counts, a.nextWindow, key, a.nextUsed - had, chunk) || waits
    }
    return waits
  }

  /**
   * Sends what was raised to the ledger, and `send`s the answers: at once when nothing of
   * theirs waits (`waits` false), else once the write that covers them is durable; told false
   * when it failed (the answers then refuse: the units stay counted at the part).
   */
  settle(waits: boolean, send: (ok: boolean) => void): void {
    const write = this.#write()
    if (!waits) return send(true)
    const covering = write ?? this.#writes.at(-1)
    if (covering === undefined) return send(false)
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

  /** Counts `units` admitted of `key` in `window`; true when what is written does not cover it. */
  #note(counts: FamilyCounts, window: number, key: string, units: number, chunk: number): boolean {
    if (!(units > 0)) return false
    const c = counts.count(window, key)
    c.admitted += units
    // Less than half a chunk left reserved: reserve a chunk ahead.
    if (c.admitted > c.target - chunk / 2) {
      c.target = c.admitted + chunk
      let raised = counts.raised.get(window)
      if (raised === undefined) counts.raised.set(window, (raised = new Map<string, Count>()))
      raised.set(key, c)
    }
    return c.admitted > c.durable
  }

  /** A write of every count raised since the last, or undefined when none was. */
  #write(): Write | undefined {
    let write: Write | undefined
    for (const counts of this.#families.values()) {
      if (counts.raised.size === 0) continue
      write ??= { counts: [], waiting: [], ok: true, done: false }
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
    this.#host.afterWrite((ok) => this.#written(write, ok && write.ok))
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
