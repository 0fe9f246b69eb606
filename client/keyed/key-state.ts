import type { LeaseGrant, LeaseProof } from '../../shared/index.js'
import type { TokenBucket, WaitQueue } from '../../shared/limiters/index.js'
import type { Permit } from '../enforcer.js'

/** One key as this process knows it. Fields set in the constructor: a stable shape. */
export class KeyState {
  readonly key: string
  readonly bucket: TokenBucket
  /** Slots in use (concurrency). */
  inFlight = 0
  /** Whole slots allowed now (concurrency), or a quota's budget in force. */
  slots = 0
  /** The family epoch (or key lease change) the bucket's rate was set for. */
  epoch = -1
  /** When what this key may use changes by time alone (a lease lapsing), on the hot clock. */
  changeAtMs = Infinity
  asked = 0
  refused = 0
  peak = 0
  /** When a report last found this key asked for here (on the client's clock). */
  askedAtMs = -Infinity
  /** The key's own lease, while it is hot: the default share does not apply. */
  lease: LeaseGrant | undefined = undefined
  leaseUntilMs = 0
  fallbackUntilMs = 0
  leaseProof: LeaseProof | undefined = undefined
  /** Not reported before this (the coordinator refused to lease it on its own). */
  quietUntilMs = 0
  /**
   * Quota: the coordinator refused a remote ask of this key: not asked again before this (hot
   * clock), at most a refresh period on, so a key spent everywhere costs the coordinator one ask
   * a period per process, not one per request.
   */
  askNotBeforeMs = 0
  lastUsedMs = 0
  movedMs = 0
  /**
   * Rate: the key's own lease said a rise is coming (`rising`): a check its part cannot decide
   * waits for the next lease until this (client clock); 0 when none is.
   */
  risingUntilMs = 0
  /** Rate: the cost of checks waiting for the key's next lease (family.ts `#keyMoveWaitMs`). */
  keyWaiting = 0
  /**
   * Leased on its own unasked (it went hot elsewhere): its next report names it, a quota's with
   * what it spent, a rate or concurrency key's asking for nothing (family.ts, `applyKeyLease`).
   */
  mustReport = false
  /** Quota: units spent in window `usedWindow` (the default share's and the key lease's alike). */
  used = 0
  usedWindow = Number.NaN
  /**
   * Quota: units spent of the next window's part sent ahead (window `nextUsedWindow`; -1, a
   * small integer rather than a boxed NaN: none), checks made between this window's end and
   * that one's start (quota-keys.ts, `straddle`).
   */
  nextUsed = 0
  nextUsedWindow = -1
  /**
   * Quota: of `used`, the units spent ahead (`nextUsed`, carried in): the coordinator's clock may
   * have put them in the window before, so a key reset does not give them back (reported as
   * `charged`, as a share's handed-on units are).
   */
  carried = 0
  /** Quota: the window of the budget in force (`slots`), and when spending it ends (hot clock). */
  window = Number.NaN
  endAtMs = 0
  /** Callers waiting in `acquire` for this key, in order (made when the first one waits). */
  waiters: WaitQueue<Permit> | undefined = undefined

  constructor(key: string, bucket: TokenBucket) {
    this.key = key
    this.bucket = bucket
  }
}
