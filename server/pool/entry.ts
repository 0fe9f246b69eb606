import type { BurstSlack } from './burst-slack.js'
import type { Vacancy } from './handover.js'
import type { HeldVacancy, PendingHanded } from './held-handover.js'
import { clockDriftShare, kindTraits } from '../../shared/index.js'
import type { ResourceSettings } from '../config/index.js'
import { DemandHistory } from './demand.js'
import type { Shape } from './shapes/index.js'

/** (√5 − 1) / 2: multiples of it modulo 1 spread evenly for any run of consecutive integers. */
const goldenRatio = 0.6180339887498949

/**
 * One lease as the coordinator counts it. The client may enforce `capacity`
 * until `holdUntilMs` (sent + ttl + grace), then, in `safe` mode,
 * `fallback` until `fallbackUntilMs` (+ safeHoldMs); after that nothing.
 */
export interface LeaseRecord {
  readonly seq: number
  readonly capacity: number
  /** As sent: leaseTtlMs, or less when a parent's lease ends sooner. */
  readonly ttlMs: number
  readonly sentMs: number
  holdUntilMs: number
  /** What the client may fall back to once this lease lapses: min(safeCapacity, capacity). */
  readonly fallback: number
  fallbackUntilMs: number
  /** Whether the client acknowledged this lease (it is in force there). */
  acked: boolean
  /** Lapsed while its client was away: it never counts in full again, even once it is back. */
  lapsed: boolean
}

/**
 * A quota's block (a keyed family's: its share) of its next window, sent ahead of the current
 * one's end with the leases of it (ahead.ts): counted from the moment it is sent until
 * `holdUntilMs` (the next window's end and the send delay), and a lease of that window once it
 * opens (`Entry.promoteAhead`).
 */
export interface AheadRecord {
  readonly window: number
  readonly capacity: number
  /** When the next window opens and ends, on the pool's clock. */
  readonly startMs: number
  readonly endMs: number
  readonly holdUntilMs: number
}

export { clockDriftShare }

/**
 * What the coordinator's own part may have admitted of each key of a keyed quota in one window
 * (`Entry.reserved`): units per key, never less than it answered admitted.
 */
export interface SpendReserve {
  readonly window: number
  readonly keys: Map<string, number>
  /**
   * Past `maxSpentKeys` keys: no key is counted any more (the share of that window cannot be
   * vouched for, as a release of that many cannot say them; it stays spent to the window's end).
   */
  readonly full?: true
}

/** No reservation yet (undefined: restored from a ledger whose writer did not reserve). */
const noReserves: readonly SpendReserve[] = Object.freeze([])

/** Numbered reports a client's window edges may be measured from (`ClientState.edgeReport`). */
const keptReports = 8

/** What a record commits at `nowMs`. */
function recordCommits(l: LeaseRecord, nowMs: number): number {
  if (nowMs < l.holdUntilMs && !l.lapsed) return l.capacity
  if (nowMs < l.fallbackUntilMs) return l.fallback
  return 0
}

/**
 * A client process as the pool knows it. `key` is the pool's own name for
 * it: the client id scoped by tenant, or for the leftover of a replaced
 * process, a name of its own, so its commitments count until they lapse.
 */
export class ClientState {
  readonly key: string
  readonly clientId: string
  readonly tenant: string | undefined
  /** The process's instance nonce from its hello; undefined when it sent none. */
  instance: string | undefined
  connected = true
  /** Batches numbered below this were sent on an earlier connection: their acks are void. */
  sinceSeq = 1
  /** Sequence number of the newest batch sent to this client; 0 before any. */
  lastSentSeq = 0
  readonly entries = new Map<string, Entry>()
  /** Of `entries`, those of keys of keyed families. */
  keyEntries = 0
  /**
   * The newest numbered report handled (its `n`) and when: a quota lease's window edge is
   * measured from it (`edge`), which the client places on its own clock by the report's
   * sending. Undefined for a client that does not number its reports.
   */
  lastReport: { readonly n: number; readonly atMs: number } | undefined = undefined
  /** The newest numbered reports that said when they were sent (`demand.at`), oldest first. */
  #recentReports: { readonly n: number; readonly atMs: number; readonly sentMs: number }[] = []
  /**
   * The report quota leases measure their window's end from (`edge`): of `#recentReports`, the
   * one that came soonest; `lastReport` when none said when it was sent. Chosen as reports come,
   * not per lease (a round may lease thousands of a client's keys at one instant).
   */
  edgeReport: { readonly n: number; readonly atMs: number } | undefined = undefined
  /**
   * The connection's round trip as its session last measured it (ms; 0 unknown), as of the
   * newest report: a quota's blocks last a refresh period's renewal and this (named-quota.ts).
   */
  rttMs = 0

  constructor(key: string, clientId: string, tenant: string | undefined, instance?: string) {
    this.key = key
    this.clientId = clientId
    this.tenant = tenant
    this.instance = instance
  }

  /** Report `n` was handled at `atMs`, sent at `sentMs` on the client's own clock (if it said). */
  noteReport(n: number, atMs: number, sentMs: number | undefined): void {
    if (n <= (this.lastReport?.n ?? 0)) return
    this.lastReport = { n, atMs }
    const recent = this.#recentReports
    if (sentMs !== undefined) {
      recent.push({ n, atMs, sentMs })
      if (recent.length > keptReports) recent.shift()
    }
    // The one that places the end latest on the client's clock: sent at + the time since it was
    // handled, less the clocks' drift. Between two reports that differs by (sent − handled · (1 −
    // drift)), whenever the lease is made: the least one-way delay, an older one paying drift.
    let best: { readonly n: number; readonly atMs: number } | undefined = this.lastReport
    let bestMs = -Infinity
    for (const r of recent) {
      const placedMs = r.sentMs - r.atMs * (1 - clockDriftShare)
      if (placedMs > bestMs) {
        bestMs = placedMs
        best = r
      }
    }
    this.edgeReport = best
  }
}

/** What a client's hello claimed of a learning resource, and what of it was confirmed. */
export interface Claim {
  readonly capacity: number
  readonly issued: readonly [number, number] | undefined
  accepted: number
}

/**
 * An entry's quota window before it has one: never a window's index (those count up from 0).
 * Not NaN: a field that ever holds NaN is a boxed number in every entry (16 bytes each, and a
 * family's hot keys are entries by the ten thousand); small integers are not boxed.
 */
export const noWindow = -1

/** `Entry.reportedMs` before any report: long before any time the pool sees (and a small integer). */
export const neverReported = -1_000_000_000

const noEntries: ReadonlySet<Entry> = new Set()
const noClaims: ReadonlyMap<Entry, Claim> = new Map()
const noClients: ReadonlySet<string> = new Set()

/** One resource's pool state: its settings and one entry per client using it. */
export class ResourceState {
  settings: ResourceSettings
  /** What kind of resource it is in a round (shapes/): chosen from its settings, again on a reload. */
  shape: Shape
  readonly entries = new Map<string, Entry>()
  /** Σ entry.committed, kept incrementally and recomputed exactly each round. */
  #committedSum = 0
  /**
   * A rate resource's (a keyed family's) burst that no lease may hold: how much of it a lease
   * may start full with (lease-out.ts). Made by the registry for kinds that refill; it hears
   * every change of `committedSum`, at `seenMs`.
   */
  burstSlack: BurstSlack | undefined = undefined
  /**
   * A rate family's round in which a process that never held a share waits for its first: the
   * falls it sends say `handOn`, so their holders give up what fell for it (fall-gifts.ts).
   */
  handOnFalls = false
  /**
   * A hot key's round in which the one holder that asks for it rises: a fall to 0 of a holder
   * that has not asked for the key since it went hot (seeded, never reported) says `handOn` too, so its holder gives up
   * what the slices that fell held, for the rise to start with (#41: a new customer's key asked
   * at one gateway of three went hot there; the other two, never asked for it, fell to 0
   * keeping their thirds of its burst, full and never spent, and the gateway that asked got its
   * own third: 41 of 105 over 5 s where one central limiter admits all 105). Not a holder that
   * asked for it and went quiet, nor where several ask: a holder may ask again and spend its
   * excess where it is (given to every rise, "a 6th joins" fell from 98.4% to 97.3-97.7% of the
   * central limiter; given by holders not asking since the key went hot, to 98.0-98.2%).
   */
  handOnToZero = false
  /**
   * A hot key whose last round kept a holder's seeded lease (it has not said whether it asks
   * for the key since it went hot, shapes/hot-key.ts): a rise waits for that holder's report
   * (a refresh period at most), not for falls on their way, so no lease says `rising`.
   */
  seedsHeld = false
  /**
   * A hot key's gifts (clients.ts `noteGiven`): tokens its falls gave up as their acks came
   * (`giftTokens`), kept for the rises they pay for (lease-out.ts, `fill`), and the burst of the
   * slices that gave them, free since (`giftRoom`). A joiner's rise is granted whole as the last
   * fall made for it is acknowledged: kept only while one ack was handled, as a named rate's
   * are (`PoolState.handBack`), it held the last faller's gift alone. Whatever is granted out of
   * what is free is counted out of the gifts' slices first (`#grantedOfGifts`), and the tokens
   * never exceed what is left of them: a slice that gave its tokens and went to a riser that
   * did not take them (it earns them anew, from empty) takes them with it, never counted twice.
   */
  giftTokens = 0
  giftRoom = 0
  /** The newest time an entry of this resource recomputed what it commits. */
  seenMs = -Infinity
  /** Entries whose target is above their newest lease, waiting for free capacity (made when first needed). */
  #starved: Set<Entry> | undefined
  learningUntilMs: number
  /**
   * The latest time any lease of this resource recorded so far may be enforced (its fallback
   * hold included); before any, when the pool began to know what is held. A grant may start a
   * bucket full only with what of the burst nobody may hold (`burstSlack`).
   */
  heldUntilMs: number
  /**
   * A keyed family's own resource: crowded at its last round (shapes/default-holders.ts). It
   * stays so with one process fewer, so a rolling deploy does not move shares back and forth.
   */
  crowded = false
  /**
   * A keyed quota family's first round that shared it out here (NaN before): its shares are
   * young for a while after (shapes/keyed-quota-share.ts).
   */
  sharedSinceMs = Number.NaN
  /**
   * A quota's window whose leases were sent again before its end (edge-renewal.ts; NaN before
   * any): a lease acknowledged after that, before the end, is sent again then.
   */
  renewedWindow = Number.NaN
  rounds = 0
  /** While learning: what each client's hello claimed, and what of it was confirmed (made when first needed). */
  #claims: Map<Entry, Claim> | undefined
  /**
   * A family's key: the tenant whose client made it hot (its hot-key slot is that tenant's),
   * and the clients whose entries were dropped idle while it stayed hot (they enforce 0 of it,
   * and hear when it goes back to the default split). Both only on keys.
   */
  hotFor: string | undefined = undefined
  #idleClients: Set<string> | undefined = undefined
  /**
   * A quota's budget reset in window `window` (reset.ts): what its clients had reported
   * used when the reset took effect is given back (`units`, added to the window's budget),
   * and `askedMs`, until then, when the reset was asked for. Only on quotas reset.
   */
  reset: { window: number; units: number; askedMs?: number | undefined } | undefined = undefined

  constructor(
    settings: ResourceSettings,
    shape: Shape,
    learningUntilMs: number,
    quietSinceMs = -Infinity,
  ) {
    this.settings = settings
    this.shape = shape
    this.learningUntilMs = learningUntilMs
    this.heldUntilMs = quietSinceMs
  }

  get committedSum(): number {
    return this.#committedSum
  }

  set committedSum(sum: number) {
    const rose = sum - this.#committedSum
    this.#committedSum = sum
    if (rose > 0 && this.giftRoom > 0) this.#grantedOfGifts(rose)
    const capacity = this.settings.capacity
    this.burstSlack?.hold(capacity > 0 ? Math.min(1, Math.max(0, sum / capacity)) : 1, this.seenMs)
  }

  /** `capacity` more committed: granted out of the gifts' free slices first (`giftRoom`). */
  #grantedOfGifts(capacity: number): void {
    const s = this.settings
    const burst = s.capacity > 0 ? (capacity / s.capacity) * s.burst : this.giftRoom
    this.giftRoom = Math.max(0, this.giftRoom - burst)
    this.giftTokens = Math.min(this.giftTokens, this.giftRoom)
  }

  // A family's hot keys come by the thousand and most never starve or learn: their sets are
  // made on first use (an empty Map or Set costs about 100 bytes).

  /** What a reset added to the budget of window `windowIndex` (0 without one). */
  resetUnits(windowIndex: number | undefined): number {
    const reset = this.reset
    return reset !== undefined && reset.window === windowIndex ? reset.units : 0
  }

  get starved(): ReadonlySet<Entry> {
    return this.#starved ?? noEntries
  }

  starve(entry: Entry): void {
    ;(this.#starved ??= new Set()).add(entry)
  }

  unstarve(entry: Entry): void {
    // Dropped once empty: a key's entries are seldom starved for long (a loop over `starved`
    // goes on over the set it began with).
    if (this.#starved?.delete(entry) === true && this.#starved.size === 0) this.#starved = undefined
  }

  clearStarved(): void {
    this.#starved = undefined
  }

  get claims(): ReadonlyMap<Entry, Claim> {
    return this.#claims ?? noClaims
  }

  claim(entry: Entry, claim: Claim): void {
    ;(this.#claims ??= new Map()).set(entry, claim)
  }

  unclaim(entry: Entry): void {
    this.#claims?.delete(entry)
  }

  clearClaims(): void {
    this.#claims = undefined
  }

  /** Clients (by key) whose entry of this key was dropped idle: they hold a lease of 0 of it. */
  get idleClients(): ReadonlySet<string> {
    return this.#idleClients ?? noClients
  }

  noteIdle(clientKey: string): void {
    ;(this.#idleClients ??= new Set()).add(clientKey)
  }

  unnoteIdle(clientKey: string): void {
    if (this.#idleClients?.delete(clientKey) === true && this.#idleClients.size === 0)
      this.#idleClients = undefined
  }

  /** Notes a lease that may be enforced until `untilMs`. */
  held(untilMs: number): void {
    if (untilMs > this.heldUntilMs) this.heldUntilMs = untilMs
  }

  /** Differences below this are rounding noise, not lease changes. */
  get epsilon(): number {
    return 1e-9 * Math.max(1, this.settings.capacity)
  }
}

/**
 * One client's use of one resource: its demand history, its target from the
 * last round, and every lease that still counts against the pool.
 *
 * What counts (docs/protocol.md, "What the coordinator counts"): every lease
 * not yet replaced by an acknowledged newer one, until it lapses, then its
 * fallback until the safe hold ends. A concurrency lease does not lapse while
 * its client is connected (slots taken under it may still be in flight until
 * the client acknowledges a smaller one); once the connection is gone, it
 * lapses a whole lease life (ttl + grace) later at the earliest.
 */
export class Entry {
  readonly client: ClientState
  readonly resource: ResourceState
  weight = 1
  priority = 0
  readonly history: DemandHistory
  target = 0
  /** Leases still counted, ascending by seq; older ones go when a newer one is acked, or lapse. */
  leases: LeaseRecord[] = []
  /**
   * What the entry commits, as last computed; never below the true value (lapses only lower it).
   * A block of the next window sent ahead counts in it too, in both windows (ahead.ts).
   */
  committed = 0
  /** Of `committed`, what its leases alone commit (the block sent ahead aside). */
  #leased = 0
  /**
   * What the newest lease lets the client use, as last computed: its capacity, or once it has
   * lapsed its fallback while the hold lasts, then 0. Renewals and the next round start here, so
   * renewing a lapsed lease never raises what is committed without free capacity.
   */
  #current = 0
  /** The next report renews the lease whatever its age (after a reconnect: renewals carry acks). */
  resendDue = false
  /**
   * Whether the ledger may hold a record of this entry (a put written, or restored from one):
   * a keyed quota's key entry that never committed anything is not written (ledger-projection.ts,
   * `unrecorded`), and then neither is its removal.
   */
  ledgered = false
  /** Quota: units the client reported used in window `usedWindow` (`noWindow`: none reported). */
  used = 0
  usedWindow = noWindow
  /** A keyed quota's key: of `used`, the units the client was handed as spent by others. */
  charged = 0
  /** Quota: the window of the newest lease sent (`noWindow` before any, and for one a ledger restored). */
  leaseWindow = noWindow
  /** The quota window whose end its lease was last sent again for (edge-renewal.ts): once a window. */
  renewedWindow = noWindow
  /** A quota: its block (a family's share) of the next window, sent ahead (ahead.ts); in `committed`. */
  ahead: AheadRecord | undefined = undefined
  /** That block, once it became the newest lease, until a round has sent it again or a newer one. */
  promoted: LeaseRecord | undefined = undefined
  /**
   * When the client last reported demand for this resource (whole ms: a small integer is not
   * boxed); `neverReported` before any. A key's demand not reported lately counts as none.
   */
  reportedMs = neverReported
  /**
   * A family's hot key: when this entry was seeded from its client's default share
   * (hot-keys.ts). Until the client reports the key after that, what it spent of it is not
   * known here (a quota's round keeps its lease meanwhile: shapes/named-quota.ts).
   */
  seededMs = neverReported
  /**
   * A hot rate key's holder whose report made the key hot, asking for it: its seed says `rising`
   * (lease-out.ts), and its leases go on saying it until a round of the key finds no other
   * holder's seed kept (each has said whether it asks for the key): from then on they say
   * whether a rise is on its way (shapes/hot-key.ts).
   */
  riseAsked = false
  /** Its first report since `seededMs` said it never asked for the key (`unasked`). */
  seedUnasked = false
  /** Its last lease said `rising`: a lease that does not must follow (shapes/hot-key.ts). */
  saidRising = false
  /** A keyed quota's key: the `elsewhere` its newest lease said (lease-out.ts). */
  sentElsewhere = 0
  /** A rate key reset (reset.ts): the next lease sent says to fill the bucket (`full`), once. */
  refillDue = false
  /** Keyed quota share, set aside on a release that said what it spent: it may be handed on (handover.ts). */
  vacancy: Vacancy | undefined = undefined
  /**
   * Keyed quota share handed a vacancy: the keys it must count spent, sent with every lease
   * from batch `fromSeq` on until one is acknowledged (handover.ts).
   */
  inherit: { window: number; keys: [string, number][]; fromSeq: number; id: string } | undefined =
    undefined
  /** Rate family share, set aside on a release that said what it held: it may be handed on (held-handover.ts). */
  heldVacancy: HeldVacancy | undefined = undefined
  /** Whether a lease of more than 0 was ever sent to it (a held vacancy goes only to one never sent any). */
  everHeld = false
  /**
   * Rate family share: when a round first found it waiting for its first share, the falls made
   * for it under way (shapes/family-share.ts); its first share goes whole for a while after
   * (increases.ts `wholeFirst`).
   */
  joinedAtMs: number | undefined = undefined
  /** Rate family share handed a held vacancy: what it held, sent with every lease until one is acknowledged. */
  handed: PendingHanded | undefined = undefined
  /**
   * Rate family share: the level of the falls' gifts its first share took (fall-gifts.ts), less
   * what its own falls for joiners passed on since: what it may say its falls give beyond their
   * share (noteFallHeld).
   */
  giftLevel = 0
  /**
   * A hot key's share handed on with a held vacancy (held-handover.ts): the tokens its next
   * lease's bucket starts with (`fill`), sent once.
   */
  handFill = 0
  /**
   * A keyed family's share: its client asks the coordinator what its part cannot decide (as its
   * last report said). Crowded, such a client holds no default share (default-holders.ts).
   */
  decidesRemotely = false
  /**
   * A keyed family's share: its client has reported checks of the family (wants above 0) at
   * least once. Crowded, one that has not holds no default share yet (default-holders.ts).
   */
  hasChecked = false
  /**
   * A keyed family's share, as its last round found: its client asks remotely in a crowded
   * family, so the coordinator's own part decides for it; it holds no default share, and no
   * part of a hot key (shapes/default-holders.ts, shapes/hot-key.ts).
   */
  decidedCentrally = false
  /** Keyed quota share: how many spent keys of others it was handed in window `inheritedWindow`. */
  inheritedKeys = 0
  inheritedWindow = noWindow
  /**
   * Keyed quota share of the coordinator's own part (server/coordinator/central.ts): of each
   * key, at least what it answered admitted in a window, written before those answers went
   * (central-spend.ts). A takeover frees the rest of its share (clients.ts, `freeDeadCentral`).
   * Undefined: restored from a ledger whose writer did not reserve (its share stays spent).
   */
  reserved: readonly SpendReserve[] | undefined = noReserves

  constructor(client: ClientState, resource: ResourceState) {
    this.client = client
    this.resource = resource
    this.history = new DemandHistory(resource.settings.estimator, resource.settings.window)
  }

  /** What the newest lease sent lets the client use now (see #current); 0 before any. */
  get newest(): number {
    return this.#current
  }

  get lastSentMs(): number {
    return this.leases.at(-1)?.sentMs ?? -Infinity
  }

  /**
   * A quota: whether the newest lease sent is of a window before `windowIndex` (a ledger's
   * restored lease, of no known window, is not). What it let the client spend there is no part
   * of that window's budget: renewed or cut into it, it would be spent on top of what the
   * window's blocks (sent ahead, then by rounds) already give out of all of it (found with a
   * keyed quota over 30 gateways, 102 of 100: test/server/pool/past-window-renewal.test.ts).
   */
  leasedBefore(windowIndex: number): boolean {
    return this.leaseWindow !== noWindow && this.leaseWindow < windowIndex
  }

  /** Life of the newest lease sent. */
  get lastTtlMs(): number {
    return this.leases.at(-1)?.ttlMs ?? this.resource.settings.leaseTtlMs
  }

  /**
   * Whether a report at `nowMs` renews the newest lease: once a share of its
   * life between a third and a half has passed, the share spread by the
   * lease's sequence number (golden-ratio steps, so consecutive leases land
   * far apart). The client keeps at least half the lease in hand against lost
   * messages. One fixed share kept clients whose first leases came in the
   * same burst (a coordinator start, say) renewing in the same second for
   * good: at 10,000 clients, waves of 10,000 renewals and acks within 1.5 s
   * every 4 s (docs/benchmarks.md, Renewals spread).
   */
  renewDue(nowMs: number): boolean {
    const last = this.leases.at(-1)
    if (last === undefined) return false
    const share = 1 / 3 + ((last.seq * goldenRatio) % 1) / 6
    return nowMs - last.sentMs >= last.ttlMs * share
  }

  /** Whether a lease sent at `sinceMs` or before still waits for its ack while committing more than it. */
  awaitsDecreaseAck(sinceMs: number): boolean {
    const newest = this.leases.at(-1)
    if (newest === undefined || newest.acked || newest.sentMs > sinceMs) return false
    return this.#leased > newest.capacity + this.resource.epsilon
  }

  /** The largest capacity of any lease still counted (for a quota: the most it was leased of the window). */
  heldMost(): number {
    let most = this.committed
    for (const l of this.leases) if (l.capacity > most) most = l.capacity
    return most
  }

  /** Concurrency leases of a connected client never lapse on their own. */
  get pinned(): boolean {
    return this.#pinned
  }

  get #pinned(): boolean {
    return this.client.connected && kindTraits[this.resource.settings.kind].holdsInFlight
  }

  /** What this entry commits at `nowMs`, lapses counted, without changing anything. */
  committedAt(nowMs: number): number {
    const ahead = this.ahead
    const early = ahead !== undefined && nowMs < ahead.holdUntilMs ? ahead.capacity : 0
    return Math.max(early, this.#leasesCommitAt(nowMs))
  }

  #leasesCommitAt(nowMs: number): number {
    let max = 0
    const pinned = this.#pinned
    for (const l of this.leases) {
      const c = pinned && !l.lapsed ? l.capacity : recordCommits(l, nowMs)
      if (c > max) max = c
    }
    return max
  }

  /**
   * Drops what has lapsed entirely and recomputes `committed`, keeping the
   * resource's sum in step. Returns whether a lease was dropped.
   */
  refresh(nowMs: number): boolean {
    const pinned = this.#pinned
    // A loop, not some() with a closure: every report refreshes its entry (per-report garbage).
    let dropped = false
    for (let i = 0; i < this.leases.length && !dropped; i++)
      dropped = isGone(this.leases[i]!, nowMs, pinned)
    if (dropped) this.leases = this.leases.filter((l) => !isGone(l, nowMs, pinned))
    this.#setCommitted(nowMs)
    return dropped
  }

  /** Restores leases a ledger kept (seq 0: no ack of this coordinator's matches them). */
  restore(records: readonly LeaseRecord[], nowMs: number): void {
    this.leases = [...records]
    for (const l of records)
      if (l.capacity > 0 || l.fallback > 0) this.resource.held(l.fallbackUntilMs)
    this.#setCommitted(nowMs)
  }

  /** Records a lease of `ttlMs` as sent now. */
  record(
    seq: number,
    capacity: number,
    fallback: number,
    ttlMs: number,
    nowMs: number,
    sendDelayMs = 0,
  ): void {
    const s = this.resource.settings
    // The lease may leave up to sendDelayMs from now (a ledger write first): counted from then.
    const holdUntilMs = nowMs + sendDelayMs + ttlMs + s.graceMs
    this.leases.push({
      seq,
      capacity,
      ttlMs,
      sentMs: nowMs,
      holdUntilMs,
      fallback,
      fallbackUntilMs: holdUntilMs + s.safeHoldMs,
      acked: false,
      lapsed: false,
    })
    if (capacity > 0 || fallback > 0) this.resource.held(holdUntilMs + s.safeHoldMs)
    this.resendDue = false
    this.#setCommitted(nowMs)
  }

  /**
   * The client has put the lease of batch `seq` in force: every older lease
   * of this entry is replaced. False when this entry had no lease in that
   * batch (an ack never reaches beyond the leases it names).
   */
  acknowledge(seq: number, nowMs: number): boolean {
    // The last lease of the batch: a batch carries one lease per resource, and were there two,
    // the client put them in force in order, so the last is the one in force.
    const i = this.leases.findLastIndex((l) => l.seq === seq)
    if (i < 0) return false
    this.leases[i]!.acked = true
    if (i > 0) this.leases = this.leases.slice(i)
    this.#setCommitted(nowMs)
    return true
  }

  /**
   * The connection is gone: from now on leases lapse. A concurrency lease
   * held while connected lapses no sooner than a lease life from now; one
   * that already lapsed (while its client was away before) stays as it was.
   */
  disconnected(nowMs: number): void {
    if (!kindTraits[this.resource.settings.kind].holdsInFlight) return
    const s = this.resource.settings
    for (const l of this.leases) {
      // A lease that lapsed while its client was away before is over for the client too: going
      // away again does not bring it back (found by the model: 2 committed of 1 after a cut).
      if (l.lapsed) continue
      const holdUntilMs = Math.max(l.holdUntilMs, nowMs + l.ttlMs + s.graceMs)
      l.fallbackUntilMs += holdUntilMs - l.holdUntilMs
      l.holdUntilMs = holdUntilMs
      if (l.capacity > 0 || l.fallback > 0) this.resource.held(l.fallbackUntilMs)
    }
  }

  /**
   * The client is back (the same process). A lease that lapsed while it was
   * away stays lapsed: its capacity may have gone to others since.
   */
  reconnected(nowMs: number): void {
    for (const l of this.leases) if (nowMs >= l.holdUntilMs) l.lapsed = true
    this.resendDue = true
    this.#setCommitted(nowMs)
  }

  /** The client gave the resource up: nothing of it counts any more. */
  clear(nowMs: number): void {
    this.leases = []
    this.ahead = undefined
    this.#setCommitted(nowMs)
  }

  /**
   * Window `windowIndex` is in force: a block of it sent ahead becomes the newest lease (of
   * the newest lease's batch, acknowledged as it is: the client put the block in hand with
   * it), counted as it was until the window's end; one of an earlier window is dropped.
   * Returns whether it became a lease.
   */
  promoteAhead(windowIndex: number, graceMs: number, nowMs: number): boolean {
    const ahead = this.ahead
    if (ahead === undefined || ahead.window > windowIndex) return false
    this.ahead = undefined
    const last = this.leases.at(-1)
    if (ahead.window === windowIndex) {
      // No fallback: a quota's budget is spent only within its window, whatever the lease's life.
      this.leases.push({
        seq: last?.seq ?? 0,
        capacity: ahead.capacity,
        ttlMs: Math.max(0, Math.floor(ahead.endMs - ahead.startMs - graceMs)),
        sentMs: Math.max(nowMs, ahead.startMs),
        holdUntilMs: ahead.holdUntilMs,
        fallback: 0,
        fallbackUntilMs: ahead.holdUntilMs,
        acked: last?.acked ?? true,
        lapsed: false,
      })
      this.promoted = this.leases.at(-1)
      this.leaseWindow = windowIndex
    }
    this.#setCommitted(nowMs)
    return ahead.window === windowIndex
  }

  #setCommitted(nowMs: number): void {
    this.#leased = this.#leasesCommitAt(nowMs)
    const value = this.committedAt(nowMs)
    if (nowMs > this.resource.seenMs) this.resource.seenMs = nowMs
    this.resource.committedSum += value - this.committed
    this.committed = value
    const last = this.leases.at(-1)
    this.#current =
      last === undefined
        ? 0
        : this.#pinned && !last.lapsed
          ? last.capacity
          : recordCommits(last, nowMs)
  }
}

/** Whether a lease no longer counts at all: its fallback hold is over (and, pinned, it lapsed). */
function isGone(l: LeaseRecord, nowMs: number, pinned: boolean): boolean {
  return l.fallbackUntilMs <= nowMs && (!pinned || l.lapsed)
}
