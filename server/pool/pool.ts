import { allocate, wholeTokens, wholeUnits, type ClientDemand } from '../allocation/index.js'
import {
  copySettings,
  leaseTtlMsAt,
  windowAt,
  type FamilySettings,
  type ResourceSettings,
  type WindowSpec,
} from '../config/index.js'
import { inKindUnits, kindTraits, wholeSlots, type LeaseGrant } from '../../shared/index.js'
import type { LedgerChange, LedgerEntry, LedgerStamp } from '../ledger/index.js'
import { ClientState, Entry, ResourceState, noWindow, type LeaseRecord } from './entry.js'
import type { ClientSnapshot, QuotaWindowSnapshot, ResourceSnapshot } from './snapshot.js'

/** Where the pool reads a resource's settings; undefined when no template matches the id. */
export type SettingsLookup = (resourceId: string) => ResourceSettings | undefined

/** A batch of leases for one client, to send as one `lease` message. */
export interface LeaseBatch {
  /** The pool's key of the client (see `clientKey`). */
  readonly clientKey: string
  readonly seq: number
  readonly leases: LeaseGrant[]
}

export interface DemandReport {
  readonly resource: string
  readonly wants: number
  /** Quota: units used in `window` so far. */
  readonly used?: number | undefined
  readonly window?: number | undefined
  readonly weight?: number | undefined
  readonly priority?: number | undefined
}

/** What a client says it may enforce now, in its hello. */
export interface Holding {
  readonly resource: string
  readonly capacity: number
  /** Concurrency: slots in flight (they count even above the lease until they drain). */
  readonly inFlight?: number | undefined
  /**
   * How new the lease behind the claim is (its proof's issue time and generation, compared in
   * that order): a newer claim is served first, so an older proof replayed cannot push out
   * what a newer one proves. Without it, the oldest.
   */
  readonly issued?: readonly [issuedMs: number, gen: number] | undefined
}

/**
 * A family's default split: the `maxDefaultHolders` clients that use the
 * family most (by their reported family traffic, ties by key) each want the
 * whole (1), the others nothing; fair-share over that gives each default
 * holder its weight's share. Few holders: all hold a default, so a new key's
 * first request is decided at once everywhere. Many: the default stays at a
 * token or more of every key's burst for those that use the family most.
 *
 * With tenants, the places are first split between the tenants present by
 * their weights (each gets ⌊max · weight ÷ Σ weights⌋ for its busiest
 * clients), and only what is left goes by traffic alone: one tenant's
 * clients, however many and whatever traffic they report, cannot push
 * another's out of the default split.
 */
function defaultHolders(r: ResourceState, sharing: readonly Entry[]): number[] {
  const max = r.settings.family!.maxDefaultHolders
  if (sharing.length <= max) return sharing.map(() => 1)
  const order = sharing
    .map((e, i) => ({
      i,
      traffic: e.history.estimate(),
      key: e.client.key,
      tenant: e.client.tenant,
    }))
    .sort((a, b) => b.traffic - a.traffic || (a.key < b.key ? -1 : 1))
  const wants = sharing.map(() => 0)
  let placed = 0
  const tenants = r.settings.tenants
  const present = new Map<string, number>()
  for (const o of order)
    if (o.tenant !== undefined && Object.hasOwn(tenants, o.tenant))
      present.set(o.tenant, tenants[o.tenant]!.weight)
  if (present.size >= 2) {
    let weights = 0
    for (const w of present.values()) weights += w
    const places = new Map<string, number>()
    for (const [t, w] of present) places.set(t, Math.floor((max * w) / weights))
    for (const o of order) {
      const left = o.tenant === undefined ? 0 : (places.get(o.tenant) ?? 0)
      if (left <= 0) continue
      places.set(o.tenant!, left - 1)
      wants[o.i] = 1
      placed++
    }
  }
  for (const o of order) {
    if (placed >= max) break
    if (wants[o.i] === 1) continue
    wants[o.i] = 1
    placed++
  }
  return wants
}

const familyPayloads = new WeakMap<FamilySettings, NonNullable<LeaseGrant['family']>>()

/** What a family lease says of its keys, made once per family's settings. */
function familyPayload(f: FamilySettings): NonNullable<LeaseGrant['family']> {
  let payload = familyPayloads.get(f)
  if (payload === undefined) {
    payload = Object.freeze({
      kind: f.keyKind,
      capacity: f.keyCapacity,
      burst: f.keyBurst,
      ...(Object.keys(f.plan).length === 0 ? {} : { plan: f.plan }),
    })
    familyPayloads.set(f, payload)
  }
  return payload
}

/** The quota window that holds `nowMs`, on the pool's clock: its number and end. */
export type QuotaClock = (
  spec: WindowSpec,
  nowMs: number,
) => { index: number; startMs: number; endMs: number }

/** Windows on the pool's own clock taken as the wall clock (tests, the simulator). */
const sameClockWindows: QuotaClock = (spec, nowMs) => windowAt(spec, nowMs)

/**
 * The least block a quota's process holds while the budget lasts, asked for or
 * not: one unit, or a ten-thousandth of the quota. What idle processes hold of
 * it is at most that much each, stranded at the window's end.
 */
export function quotaStandingBlock(capacity: number): number {
  return Math.max(1, Math.floor(capacity / 10_000))
}

/** Newer first: by issue time, then generation; claims without one last. */
function newerFirst(
  a: { issued?: readonly [number, number] | undefined },
  b: { issued?: readonly [number, number] | undefined },
): number {
  const [ta, ga] = a.issued ?? [-Infinity, -Infinity]
  const [tb, gb] = b.issued ?? [-Infinity, -Infinity]
  return tb - ta || gb - ga
}

/** How the connection of a hello relates to what the pool knew of its client id. */
export type ConnectOutcome =
  /** The id was unknown (or forgotten): a fresh client. */
  | 'new'
  /** The same process again (same instance): it keeps its leases. */
  | 'resumed'
  /** Another process took the id: the old one's leases count apart until they lapse. */
  | 'replaced'

/** The key of a family's hot-key slots of one tenant. */
function hotSlotKey(familyId: string, tenant: string): string {
  return `${familyId}\u0000${tenant}`
}

/** Shared empty answers: most reports change nothing, and need not allocate to say so. */
const noBatches: readonly LeaseBatch[] = Object.freeze([])
const noResources: readonly string[] = Object.freeze([])

/**
 * The pool's key for a client: its id, scoped by tenant, so two tenants can
 * never name (and so replace) the same client.
 */
export function clientKey(tenant: string | undefined, clientId: string): string {
  return tenant === undefined ? clientId : `${tenant}\u0000${clientId}`
}

/**
 * Lease bookkeeping for every resource and client of one coordinator. Pure:
 * every method takes `nowMs`; no timers, no I/O. It returns the lease
 * batches to send, and counts each one as committed the moment it returns it
 * (a batch lost on the way only lapses).
 *
 * The invariant (docs/protocol.md, "What the coordinator counts"): per
 * resource, Σ committed ≤ capacity, where a client's committed capacity is
 * the largest of its leases that is neither replaced (a newer one
 * acknowledged) nor lapsed (ttl + grace after sending), and after a lapse its
 * safe fallback until the safe hold ends. Decreases are sent at once but free
 * capacity only on ack or lapse; increases come only out of free capacity.
 * After a capacity cut the sum may stand above the new capacity until the
 * decreases are acknowledged or lapse; no increase is granted until it is
 * back under, and what silent clients hold is kept out of what is shared.
 *
 * Settings come in one way, from the `SettingsLookup` given at construction
 * (`refreshSettings` re-reads them); state goes out as frozen snapshots,
 * never as the pool's own records.
 */
/**
 * How long a resource's burst takes to refill at its capacity, ms. Infinity where no bucket
 * may start full: a kind that does not refill (slots, a quota's budget), a keyed family and
 * its hot keys.
 */
function burstRefillMs(s: ResourceSettings): number {
  // Not a keyed family either: with a family's first share full, every process started each new
  // key with its share of the key's burst at once, and the keyed fault scenario measured a key
  // 0.54 tokens over its bound under a loaded CI run (0.6 inside it alone). Until that is
  // understood, a family's keys earn their burst as before.
  if (s.quotaWindow !== undefined || s.family !== undefined) return Infinity
  if (!kindTraits[s.kind].refills || !(s.capacity > 0)) return Infinity
  return (s.burst / s.capacity) * 1000
}

export class Pool {
  readonly #clients = new Map<string, ClientState>()
  /** Per keyed family (its own resource id), the resources of its keys now in the pool (hot keys). */
  readonly #familyKeys = new Map<string, Set<ResourceState>>()
  /** Per family and tenant (`hotSlotKey`), how many of the family's hot keys are that tenant's. */
  readonly #hotKeysByTenant = new Map<string, number>()
  /** Per tenant, the resources its clients use and how many of them use each. */
  readonly #tenantResources = new Map<string, Map<string, number>>()
  readonly #resources = new Map<string, ResourceState>()
  readonly #startMs: number
  readonly #quietSinceMs: number
  /** Resources forgotten (no entries) whose last lease may still be enforced, or was lately. */
  readonly #quietAfter = new Map<string, { heldUntilMs: number; refillMs: number }>()
  readonly #settingsFor: SettingsLookup
  #batches = new Map<ClientState, LeaseBatch>()
  readonly #waiting = new Set<string>()
  // One sequence for all batches of this pool: a client id that is forgotten and comes back
  // never sees a sequence number reused, so a late ack can never match a newer batch.
  #lastSeq = 0
  #replaced = 0
  /** Whether resources re-learn for learningMs when they first appear (no trusted ledger). */
  #learn: boolean
  /** Entries whose leases changed since the last `takeChanges`, and entries gone. */
  readonly #dirty = new Set<Entry>()
  readonly #removed: { clientKey: string; resource: string }[] = []

  /** Whether changes are kept for a ledger (`takeChanges`); without one nothing piles up. */
  readonly #track: boolean
  /** Longest a batch may wait between `round` (or any call) returning it and its sending. */
  readonly #sendDelayMs: number

  /** Quota windows on this pool's clock (`QuotaClock`). */
  readonly #quotaClock: QuotaClock

  constructor(
    startMs: number,
    settingsFor: SettingsLookup,
    options: {
      learn?: boolean
      track?: boolean
      sendDelayMs?: number
      quotaClock?: QuotaClock
      /**
       * Since when the pool knows every lease that may be enforced (what it restored, what
       * it sends): default `startMs`; -Infinity for a ledger that has never been written
       * (nothing was ever leased).
       */
      quietSinceMs?: number
    } = {},
  ) {
    this.#startMs = startMs
    this.#quietSinceMs = options.quietSinceMs ?? startMs
    this.#settingsFor = settingsFor
    this.#learn = options.learn ?? true
    this.#track = options.track ?? false
    this.#sendDelayMs = options.sendDelayMs ?? 0
    this.#quotaClock = options.quotaClock ?? sameClockWindows
  }

  /**
   * Starts learning now, as a pool without a trusted ledger would have from
   * its start: every resource (and any that appears later) grants nothing
   * new until its learning period from the start ends. What the ledger
   * restored stays counted.
   */
  learnFromStart(): void {
    this.#learn = true
    for (const r of this.#resources.values())
      r.learningUntilMs = Math.max(r.learningUntilMs, this.#startMs + r.settings.learningMs)
  }

  #touch(entry: Entry): void {
    if (this.#track) this.#dirty.add(entry)
  }

  #gone(key: { clientKey: string; resource: string }): void {
    if (this.#track) this.#removed.push(key)
  }

  // ---- the ledger ----

  /**
   * What changed since the last call, as the ledger keeps it (wall-clock
   * times through `toWallMs`): each changed entry's leases, or its removal.
   */
  takeChanges(
    toWallMs: (monoMs: number) => number,
    /** The write's stamp, put on every entry (made here, not spread onto a copy: one object per entry). */
    stamp: LedgerStamp = {},
  ): LedgerChange[] {
    const changes: LedgerChange[] = []
    for (const removed of this.#removed.splice(0)) changes.push({ remove: removed })
    for (const e of this.#dirty) {
      if (e.client.entries.get(e.resource.settings.id) !== e) continue
      changes.push({ put: this.#ledgerEntry(e, toWallMs, stamp) })
    }
    this.#dirty.clear()
    return changes
  }

  /**
   * Every entry as the ledger keeps it: what a ledger that has applied every
   * `takeChanges` so far holds, with what has changed since (and is not yet
   * taken) already in. A ledger compacting takes its snapshot from here
   * instead of keeping a copy of every entry (`Ledger.snapshotFrom`): what it
   * holds is then newer, never less than what was sent (a lease is sent once
   * the write that covers it is done, and the pool drops a lease only once it
   * no longer counts).
   */
  ledgerEntries(toWallMs: (monoMs: number) => number, stamp: LedgerStamp = {}): LedgerEntry[] {
    const entries: LedgerEntry[] = []
    for (const client of this.#clients.values())
      for (const e of client.entries.values()) entries.push(this.#ledgerEntry(e, toWallMs, stamp))
    return entries
  }

  #ledgerEntry(e: Entry, toWallMs: (monoMs: number) => number, stamp: LedgerStamp): LedgerEntry {
    const { client, resource } = e
    return {
      clientKey: client.key,
      clientId: client.clientId,
      tenant: client.tenant,
      instance: client.instance,
      resource: resource.settings.id,
      pinned: e.pinned,
      commitments: e.leases.map((l) => ({
        // A lease that lapsed while its client was away counts only as its fallback.
        capacity: l.lapsed ? l.fallback : l.capacity,
        untilMs: Math.ceil(toWallMs(l.holdUntilMs)),
        fallback: l.fallback,
        fallbackUntilMs: Math.ceil(toWallMs(l.fallbackUntilMs)),
      })),
      writtenMs: stamp.writtenMs,
      writtenMono: stamp.writtenMono,
      epoch: stamp.epoch,
      ...(stamp.windowLagMs === undefined ? {} : { windowLagMs: stamp.windowLagMs }),
      // A quota's use as reported: a restarted coordinator shows it at once (other kinds'
      // entries, by the thousand in a family, carry no field for it).
      ...(e.usedWindow !== noWindow ? { used: { window: e.usedWindow, units: e.used } } : {}),
      ...(e.leaseWindow !== noWindow ? { leaseWindow: e.leaseWindow } : {}),
    }
  }

  /**
   * Starts from what a ledger kept: each client as disconnected (it will
   * reconnect, or its leases lapse), each lease as committed until its wall
   * time (through `toMonoMs`). Concurrency slots counted while connected
   * count a whole lease life from now: they may still be in flight.
   */
  restore(
    entries: readonly LedgerEntry[],
    toMonoMs: (wallMs: number, entry: LedgerEntry) => number,
    nowMs: number,
  ): number {
    let restored = 0
    for (const le of entries) {
      const settings = this.#settingsFor(le.resource)
      if (settings === undefined) continue
      let client = this.#clients.get(le.clientKey)
      if (client === undefined) {
        client = new ClientState(le.clientKey, le.clientId, le.tenant, le.instance)
        client.connected = false
        this.#clients.set(le.clientKey, client)
      }
      const entry = this.#subscribe(client, le.resource, settings)
      const records: LeaseRecord[] = le.commitments.map((c) => ({
        seq: 0,
        capacity: c.capacity,
        ttlMs: leaseTtlMsAt(settings, nowMs),
        sentMs: nowMs,
        holdUntilMs: toMonoMs(c.untilMs, le),
        fallback: c.fallback,
        fallbackUntilMs: toMonoMs(c.fallbackUntilMs, le),
        acked: true,
        lapsed: false,
      }))
      entry.restore(records, nowMs)
      if (le.used !== undefined) {
        entry.used = le.used.units
        entry.usedWindow = le.used.window
      }
      // A quota's lease is of the window the ledger says it was leased in. (A ledger of an
      // earlier version says none: a lease held past the middle of the window in force is taken
      // as of that window, a lease of the one before holding only until its end.)
      if (settings.quotaWindow !== undefined) {
        if (le.leaseWindow !== undefined) entry.leaseWindow = le.leaseWindow
        else {
          const w = this.#quotaClock(settings.quotaWindow, nowMs)
          if (records.some((l) => l.holdUntilMs >= (w.startMs + w.endMs) / 2))
            entry.leaseWindow = w.index
        }
      }
      if (le.pinned) entry.disconnected(nowMs)
      entry.refresh(nowMs)
      this.#touch(entry)
      restored++
    }
    for (const r of this.#resources.values()) this.#sweep(r, nowMs)
    return restored
  }

  // ---- queries (no state changes) ----

  /** Clients known to the pool: connected, or holding commitments that have not lapsed. */
  get clientCount(): number {
    return this.#clients.size
  }

  get resourceCount(): number {
    return this.#resources.size
  }

  /** Clients connected now (of one tenant, when given). */
  connectedCount(tenant?: string): number {
    let n = 0
    for (const c of this.#clients.values())
      if (c.connected && (tenant === undefined || c.tenant === tenant)) n++
    return n
  }

  /** Ids of the resources that have clients, in the order they first appeared. */
  resourceIds(): string[] {
    return [...this.#resources.keys()]
  }

  hasResource(resourceId: string): boolean {
    return this.#resources.has(resourceId)
  }

  /** Whether the pool knows this client (connected, or disconnected with leases). */
  hasClient(key: string): boolean {
    return this.#clients.has(key)
  }

  /** Whether a known client is connected now. */
  isConnected(key: string): boolean {
    return this.#clients.get(key)?.connected === true
  }

  /** How many distinct resources the clients of `tenant` use. */
  tenantResourceCount(tenant: string): number {
    return this.#tenantResources.get(tenant)?.size ?? 0
  }

  /** Whether a client of `tenant` uses `resourceId`. */
  tenantUses(tenant: string, resourceId: string): boolean {
    return this.#tenantResources.get(tenant)?.has(resourceId) === true
  }

  /** How many resources a client uses, the keys of keyed families left out. */
  subscriptionCount(key: string): number {
    const client = this.#clients.get(key)
    return client === undefined ? 0 : client.entries.size - client.keyEntries
  }

  isSubscribed(key: string, resourceId: string): boolean {
    return this.#clients.get(key)?.entries.has(resourceId) === true
  }

  /** Keys of the clients using a resource. */
  subscribers(resourceId: string): string[] {
    const r = this.#resources.get(resourceId)
    return r === undefined ? [] : [...r.entries.keys()]
  }

  /** The settings a resource is run with now. */
  settings(resourceId: string): ResourceSettings | undefined {
    return this.#resources.get(resourceId)?.settings
  }

  /** Σ committed of a resource at `nowMs`: leases lapsed by then do not count. */
  committed(resourceId: string, nowMs: number): number {
    const r = this.#resources.get(resourceId)
    if (r === undefined) return 0
    let sum = 0
    for (const e of r.entries.values()) sum += e.committedAt(nowMs)
    return sum
  }

  /** What one client is committed of one resource at `nowMs` (0 when it holds nothing). */
  committedBy(key: string, resourceId: string, nowMs: number): number {
    return this.#clients.get(key)?.entries.get(resourceId)?.committedAt(nowMs) ?? 0
  }

  isLearning(resourceId: string, nowMs: number): boolean {
    const r = this.#resources.get(resourceId)
    return r !== undefined && nowMs < r.learningUntilMs
  }

  /** A resource's figures at `nowMs`, or undefined when nobody uses it. */
  snapshot(resourceId: string, nowMs: number): ResourceSnapshot | undefined {
    const r = this.#resources.get(resourceId)
    if (r === undefined) return undefined
    let demand = 0
    let grant = 0
    for (const e of r.entries.values()) {
      demand += e.client.connected ? e.history.estimate() : 0
      grant += e.target
    }
    return Object.freeze({
      id: resourceId,
      settings: r.settings,
      committed: this.committed(resourceId, nowMs),
      demand,
      grant,
      clients: r.entries.size,
      learning: nowMs < r.learningUntilMs,
      rounds: r.rounds,
      window: this.#windowSnapshot(r, nowMs),
    })
  }

  #windowSnapshot(r: ResourceState, nowMs: number): QuotaWindowSnapshot | undefined {
    const spec = r.settings.quotaWindow
    if (spec === undefined) return undefined
    const w = this.#quotaClock(spec, nowMs)
    let used = 0
    for (const e of r.entries.values()) if (e.usedWindow === w.index) used += e.used
    return {
      index: w.index,
      endsInMs: Math.max(0, Math.round(w.endMs - nowMs)),
      lengthMs: Math.round(w.endMs - w.startMs),
      used,
    }
  }

  /** Each client of a resource as the pool sees it at `nowMs`. */
  clientSnapshots(resourceId: string, nowMs: number): ClientSnapshot[] {
    const r = this.#resources.get(resourceId)
    if (r === undefined) return []
    const out: ClientSnapshot[] = []
    for (const e of r.entries.values()) {
      out.push(
        Object.freeze({
          id: e.client.clientId,
          tenant: e.client.tenant,
          connected: e.client.connected,
          wants: e.history.last,
          estimatedDemand: e.history.estimate(),
          target: e.target,
          lease: e.newest,
          committed: e.committedAt(nowMs),
          weight: e.weight,
          priority: e.priority,
          lastSentMs: e.lastSentMs,
        }),
      )
    }
    return out
  }

  // ---- connections ----

  /**
   * A client (re)connects under `key`. The same process (same `instance`)
   * keeps its leases; batches sent on earlier connections can no longer be
   * acknowledged, and the next report renews every lease on this one. Any
   * other process taking a known key does not inherit what the old one
   * holds: that stays counted, apart, until it lapses.
   */
  connect(
    key: string,
    clientId: string,
    tenant: string | undefined,
    instance: string | undefined,
    nowMs: number,
  ): ConnectOutcome {
    let client = this.#clients.get(key)
    let outcome: ConnectOutcome = 'new'
    if (client !== undefined) {
      if (instance !== undefined && client.instance === instance) outcome = 'resumed'
      else {
        this.#clients.delete(client.key)
        this.#setAside(client, [...client.entries.values()], nowMs)
        client = undefined
        outcome = 'replaced'
      }
    }
    if (client === undefined) {
      client = new ClientState(key, clientId, tenant, instance)
      this.#clients.set(key, client)
    }
    client.connected = true
    client.sinceSeq = this.#lastSeq + 1
    for (const e of client.entries.values()) {
      e.reconnected(nowMs)
      this.#touch(e)
    }
    return outcome
  }

  /**
   * Holdings a client reports in its hello. A resource in learning mode
   * accepts them and confirms them with a lease; otherwise they are ignored,
   * since the pool's own records rule.
   *
   * Claims are served newest first (`Holding.issued`): each gets what it
   * claims, up to what capacity leaves beside the newer claims and what the
   * pool holds otherwise. When the claims of a resource sum beyond capacity,
   * some proof is stale (a client replaying an older, larger lease): a newer
   * claim is never cut for it, and an older one that no longer fits is cut
   * back by a decrease (pushed at once, freed on ack or lapse), so what a
   * replayed proof wins lasts no longer than the lease it was.
   */
  learnHoldings(key: string, holdings: readonly Holding[], nowMs: number): readonly LeaseBatch[] {
    const client = this.#clients.get(key)
    if (client === undefined) return []
    const touched = new Set<ResourceState>()
    for (const h of holdings) {
      const settings = this.#settingsFor(h.resource)
      if (settings === undefined) continue
      const entry = this.#subscribe(client, h.resource, settings)
      const r = entry.resource
      if (nowMs >= r.learningUntilMs || entry.leases.length > 0) continue
      r.claim(entry, {
        capacity: Math.max(h.capacity, h.inFlight ?? 0),
        issued: h.issued,
        accepted: 0,
      })
      touched.add(r)
    }
    for (const r of touched) this.#settleClaims(r, nowMs)
    return this.#flush()
  }

  /** Shares a learning resource's capacity among its claims, newest first (see learnHoldings). */
  #settleClaims(r: ResourceState, nowMs: number): void {
    let others = 0
    for (const e of r.entries.values()) if (!r.claims.has(e)) others += e.committedAt(nowMs)
    let left = Math.max(0, r.settings.capacity - others)
    const claims = [...r.claims].sort(([, a], [, b]) => newerFirst(a, b))
    for (const [entry, claim] of claims) {
      // Slots are whole: a claim is confirmed in whole slots.
      const accepted = inKindUnits(r.settings.kind, Math.min(claim.capacity, left))
      left = Math.max(0, left - accepted)
      const first = entry.leases.length === 0
      claim.accepted = accepted
      entry.target = accepted
      if (first || accepted < entry.newest - r.epsilon) this.#send(entry, accepted, nowMs)
    }
  }

  /**
   * A demand report: records each resource's demand (subscribing the client
   * to resources it has not used before) and renews the client's leases on
   * the reported resources once a third to a half of their life has passed (at once
   * after a reconnect). Returns the renewal batch and the resources that
   * deserve a prompt round (new subscriptions).
   */
  reportDemand(
    key: string,
    reports: readonly DemandReport[],
    nowMs: number,
  ): {
    batches: readonly LeaseBatch[]
    newResources: readonly string[]
    /** Reports whose `used` passed what the client was ever leased (counted as that much). */
    overReported: readonly string[]
  } {
    const client = this.#clients.get(key)
    if (client === undefined)
      return { batches: noBatches, newResources: noResources, overReported: noResources }
    let newResources: string[] | undefined
    let overReported: string[] | undefined
    for (const report of reports) {
      let entry = client.entries.get(report.resource)
      if (entry === undefined) {
        const settings = this.#settingsFor(report.resource)
        if (settings === undefined) continue
        const hot = settings.family?.role === 'key' && !this.#resources.has(report.resource)
        entry = this.#subscribe(client, report.resource, settings)
        if (hot) this.#seedKey(entry.resource, nowMs)
        ;(newResources ??= []).push(report.resource)
      }
      entry.history.record(report.wants)
      entry.reportedMs = Math.floor(nowMs)
      if (report.used !== undefined && report.window !== undefined) {
        // What a client says it used is held to what it was ever leased of the window: a larger
        // count (a bug, or a client taking the rest of a shared budget by reporting it spent) is
        // counted as that much, and answered with an error.
        const most = Math.max(entry.used, entry.heldMost())
        const used = Math.min(report.used, most)
        if (report.used > most + entry.resource.epsilon) (overReported ??= []).push(report.resource)
        this.#recordUsed(entry, used, report.window, nowMs)
      }
      if (report.weight !== undefined) entry.weight = report.weight
      if (report.priority !== undefined) entry.priority = report.priority
      entry.refresh(nowMs)
      // Renew once a third to a half of the lease's life has passed (Entry.renewDue): the client
      // keeps half or more in hand against lost messages, and a report a second costs a reply
      // only every few seconds.
      if (
        entry.leases.length > 0 &&
        (entry.resendDue || entry.renewDue(nowMs)) &&
        !this.#shareOfPastWindow(entry, nowMs)
      ) {
        this.#send(entry, entry.newest, nowMs)
      }
    }
    return {
      batches: this.#flush(),
      newResources: newResources ?? noResources,
      overReported: overReported ?? noResources,
    }
  }

  /**
   * Whether a keyed quota's share is of a window before the one in force: it is not renewed
   * into the new window (that would carry the old split over); the family's round splits anew.
   */
  #shareOfPastWindow(entry: Entry, nowMs: number): boolean {
    const s = entry.resource.settings
    if (s.family?.role !== 'family' || s.quotaWindow === undefined) return false
    return entry.leaseWindow !== this.#quotaClock(s.quotaWindow, nowMs).index
  }

  /**
   * The client put the leases of batch `seq` in force: of every resource in
   * the batch, or only of `resources` when given. Each frees the older leases
   * of its own resource, never another's; a batch sent on an earlier
   * connection is not acknowledged on this one. Grants what now fits.
   */
  acknowledge(
    key: string,
    seq: number,
    resources: readonly string[] | undefined,
    nowMs: number,
  ): readonly LeaseBatch[] {
    const client = this.#clients.get(key)
    if (client === undefined || seq < client.sinceSeq || seq > client.lastSentSeq) return []
    const touched = new Set<ResourceState>()
    const ack = (entry: Entry): void => {
      const before = entry.committed
      if (entry.acknowledge(seq, nowMs)) {
        this.#touch(entry)
        if (entry.committed < before) touched.add(entry.resource)
      }
    }
    if (resources === undefined) for (const entry of client.entries.values()) ack(entry)
    else
      for (const id of resources) {
        const entry = client.entries.get(id)
        if (entry !== undefined) ack(entry)
      }
    for (const r of touched) this.#grantIncreases(r, nowMs, false)
    return this.#flush()
  }

  /**
   * Batches the pool returned that never left (their ledger write came too
   * late, or failed). Their leases stay counted until they lapse, as sent
   * ones do; the client's next report renews them at once, rather than a
   * renewal period after a lease it never had.
   */
  unsent(batches: readonly LeaseBatch[]): void {
    for (const batch of batches) {
      const client = this.#clients.get(batch.clientKey)
      if (client === undefined) continue
      for (const lease of batch.leases) {
        const entry = client.entries.get(lease.resource)
        if (entry !== undefined) entry.resendDue = true
      }
    }
  }

  /**
   * The client gives resources up: it promises not to use them, so their leases stop counting.
   * A quota's are spent, not given back: what was used of a block (reported or not) is gone for
   * the window, so a released quota's leases count apart until the window ends, as a replaced
   * process's do, and the client starts afresh if it takes the quota up again.
   */
  release(key: string, resourceIds: readonly string[], nowMs: number): readonly LeaseBatch[] {
    const client = this.#clients.get(key)
    if (client === undefined) return []
    const touched: ResourceState[] = []
    let spent: Entry[] | undefined
    for (const id of resourceIds) {
      const entry = client.entries.get(id)
      if (entry === undefined) continue
      if (entry.resource.settings.quotaWindow !== undefined) {
        ;(spent ??= []).push(entry)
        continue
      }
      entry.clear(nowMs)
      this.#unsubscribe(entry)
      touched.push(entry.resource)
    }
    if (spent !== undefined) this.#setAside(client, spent, nowMs)
    for (const r of touched) this.#grantIncreases(r, nowMs, false)
    return this.#flush()
  }

  /**
   * The connection is gone. The leases stay committed until they lapse (the
   * process may still be running); its demand drops out of the next round.
   * A client that holds nothing is forgotten at once.
   */
  disconnect(key: string, nowMs: number): string[] {
    const client = this.#clients.get(key)
    if (client === undefined) return []
    client.connected = false
    for (const e of client.entries.values()) {
      e.disconnected(nowMs)
      e.refresh(nowMs)
      this.#touch(e)
    }
    const ids = [...client.entries.keys()]
    if (client.entries.size === 0) this.#clients.delete(key)
    return ids
  }

  /**
   * What a downstream coordinator reports to its parent for a resource: its
   * clients' total demand, and the weight that makes the parent's water level
   * equal to the one here. At level L a client of weight w and demand d gets
   * min(d, w·L), so this coordinator's clients together get Σ min(d, w·L),
   * which a single client of weight Σ min(d, w·L) / L gets too. With every
   * client satisfied (no level), the plain sum of weights.
   */
  aggregate(resourceId: string): { wants: number; weight: number } | undefined {
    const r = this.#resources.get(resourceId)
    if (r === undefined) return undefined
    let wants = 0
    let weights = 0
    let level = Infinity
    for (const e of r.entries.values()) {
      if (!e.client.connected) continue
      const d = e.history.estimate()
      wants += d
      weights += e.weight
      if (e.target < d - r.epsilon) level = Math.min(level, e.target / e.weight)
    }
    if (!(level > 0) || !Number.isFinite(level)) return { wants, weight: weights > 0 ? weights : 1 }
    let share = 0
    for (const e of r.entries.values()) {
      if (e.client.connected) share += Math.min(e.history.estimate(), e.weight * level)
    }
    return { wants, weight: share / level }
  }

  /**
   * Re-reads a resource's settings (config reload, a parent's new lease).
   * Leases follow at the next round. A resource no template matches any more
   * is drained: capacity 0, its leases shrinking through acks or lapses.
   * Returns false when the resource is drained that way.
   */
  refreshSettings(resourceId: string): boolean {
    const r = this.#resources.get(resourceId)
    if (r === undefined) return true
    const next = this.#settingsFor(resourceId)
    r.settings = next ?? copySettings(r.settings, { capacity: 0, burst: 0 })
    return next !== undefined
  }

  /**
   * Resources whose acks or releases left increases waiting that free
   * capacity could partly serve (see #grantIncreases); the caller grants
   * them shortly (`grantWaiting`), once more acks have had time to come.
   */
  takeWaiting(): readonly string[] {
    if (this.#waiting.size === 0) return noResources
    const ids = [...this.#waiting]
    this.#waiting.clear()
    return ids
  }

  /** Grants waiting increases of a resource from what is free, in part where need be. */
  grantWaiting(resourceId: string, nowMs: number): readonly LeaseBatch[] {
    const r = this.#resources.get(resourceId)
    if (r === undefined) return noBatches
    this.#grantIncreases(r, nowMs, true)
    return this.#flush()
  }

  /**
   * A keyed family's resources: its own (`<prefix>/*`) and those of its hot
   * keys. They are run together (`roundMany`, `grantWaitingMany`), so a
   * client gets one lease batch for all of them, and sends one ack, instead
   * of one per key.
   */
  familyIds(familyId: string): string[] {
    const ids = [familyId]
    for (const r of this.#familyKeys.get(familyId) ?? []) ids.push(r.settings.id)
    return ids
  }

  /** Rounds for several resources at once: one batch per client for all of them. */
  roundMany(resourceIds: readonly string[], nowMs: number): readonly LeaseBatch[] {
    for (const id of resourceIds) this.#round(id, nowMs)
    return this.#flush()
  }

  /** Grants what waits on several resources at once: one batch per client. */
  grantWaitingMany(resourceIds: readonly string[], nowMs: number): readonly LeaseBatch[] {
    for (const id of resourceIds) {
      const r = this.#resources.get(id)
      if (r !== undefined) this.#grantIncreases(r, nowMs, true)
    }
    return this.#flush()
  }

  /**
   * One round for a resource: drop lapsed leases, allocate targets over
   * estimated demand (unless learning), push decreases, then grant
   * increases out of free capacity. Returns the batches to send.
   *
   * What a silent client holds is kept out of what is shared: a client that
   * is disconnected, or that has left a decrease unacknowledged for a whole
   * refresh period (stalled, or draining slots), keeps its commitment, and
   * the others share the capacity left beside it. So a capacity cut takes
   * effect on what such clients hold too: the others shrink until it lapses.
   */
  round(resourceId: string, nowMs: number): readonly LeaseBatch[] {
    this.#round(resourceId, nowMs)
    return this.#flush()
  }

  /** One round (see `round`), its batches left for the caller's flush. */
  #round(resourceId: string, nowMs: number): void {
    const r = this.#resources.get(resourceId)
    if (r === undefined) return
    this.#sweep(r, nowMs)
    if (r.entries.size === 0) {
      this.#forget(r)
      return
    }
    r.rounds++
    if (nowMs < r.learningUntilMs) return
    if (r.claims.size > 0) r.clearClaims()

    const silentSinceMs = nowMs - r.settings.refreshMs
    const quota =
      r.settings.quotaWindow === undefined
        ? undefined
        : this.#quotaClock(r.settings.quotaWindow, nowMs)
    const sharing: Entry[] = []
    let reserved = 0
    for (const e of r.entries.values()) {
      if (!e.client.connected) {
        e.target = 0
        reserved += e.committed
      } else if (e.awaitsDecreaseAck(silentSinceMs)) {
        // Its decrease is on its way or in force, but not acknowledged: keep what it holds.
        // A quota's client cannot acknowledge a budget below what it spent before the decrease
        // came (its report lagged): it gets what it reports used, which it can take, and
        // shares again once that is acknowledged. Still within what it is committed.
        if (quota !== undefined && e.usedWindow === quota.index && e.used > e.newest + r.epsilon)
          this.#send(e, Math.min(e.committed, e.used), nowMs)
        e.target = e.newest
        reserved += e.committed
      } else sharing.push(e)
    }
    if (quota !== undefined)
      return r.settings.family?.role === 'family'
        ? this.#familyQuotaRound(r, sharing, quota.index, nowMs)
        : this.#quotaRound(r, sharing, reserved, nowMs)
    const defaults = r.settings.family?.role === 'family' ? defaultHolders(r, sharing) : undefined
    // A key is shared among those that ask for it now: a holder that does not (it never did, or
    // stopped: not reported lately) gets nothing of it, surplus spread or not, so what it was
    // seeded with goes back and a key nobody asks for goes cold (#sweep).
    let active = sharing
    if (r.settings.family?.role === 'key') {
      active = []
      for (const e of sharing)
        if (this.#demandOf(e, nowMs) > 0) active.push(e)
        else e.target = 0
    }
    const clients: ClientDemand[] = active.map((e, i) => ({
      id: e.client.key,
      wants:
        defaults !== undefined
          ? defaults[i]!
          : active !== sharing
            ? this.#demandOf(e, nowMs)
            : e.history.estimate(),
      weight: e.weight,
      priority: e.priority,
      tenant:
        e.client.tenant !== undefined && Object.hasOwn(r.settings.tenants, e.client.tenant)
          ? e.client.tenant
          : undefined,
    }))
    // Slots are whole: what is left beside the reserved slots is shared in whole slots.
    const left = Math.max(0, r.settings.capacity - reserved)
    const result = allocate({
      capacity: inKindUnits(r.settings.kind, left),
      algorithm: r.settings.algorithm,
      surplus: r.settings.surplus,
      tenants: r.settings.tenants,
      clients,
    })
    // Slots are whole: a semaphore cannot use half of one. A key's rate share admits nothing
    // below a token of its burst: with many holders, those slivers go whole to a few.
    const s = r.settings
    const grants = kindTraits[s.kind].wholeUnits
      ? wholeUnits(result.grants)
      : s.family?.role === 'key' && kindTraits[s.kind].refills && s.burst > 0
        ? wholeTokens(result.grants, s.capacity / s.burst, {
            held: (i) => active[i]!.newest,
            wants: (i) => clients[i]!.wants,
          })
        : result.grants
    for (let i = 0; i < active.length; i++) active[i]!.target = grants[i]!
    const tolerance = r.settings.headroomTolerance ?? 0
    if (tolerance > 0) this.#keepClose(r, active, clients, tolerance, left)

    // Decreases first: pushed at once, freeing capacity only on ack or lapse.
    const eps = r.epsilon
    for (const e of sharing) if (e.target < e.newest - eps) this.#send(e, e.target, nowMs)
    r.clearStarved()
    for (const e of sharing) if (e.target > e.newest + eps) r.starve(e)
    this.#grantIncreases(r, nowMs, true)
    // A client with no lease yet learns where it stands at once, even at 0 while it waits for
    // free capacity: it gets the lease's parameters (safe capacity, refresh) instead of guessing.
    for (const e of sharing) if (e.leases.length === 0) this.#send(e, 0, nowMs)
  }

  /** A client's report of what it used of a quota in a window: the newest count of this window holds. */
  #recordUsed(entry: Entry, used: number, window: number, nowMs: number): void {
    const spec = entry.resource.settings.quotaWindow
    if (spec === undefined) return
    const now = this.#quotaClock(spec, nowMs)
    if (window !== now.index) return
    if (entry.usedWindow !== now.index) {
      entry.usedWindow = now.index
      entry.used = 0
    }
    if (used > entry.used) entry.used = used
  }

  /**
   * A quota's round. Each client's budget for the window is what it used
   * (as it reported) plus a block: the budget left (capacity less what
   * everyone used, and less what silent clients hold) shared by weighted
   * max-min over the blocks asked for, a block being what the client asks
   * per second times a horizon of two refresh periods (so a steady client
   * renews about once a period), never past the window's end, and never
   * below a standing block (quotaStandingBlock). Near the end of the budget
   * blocks shrink to what is fair; a client that asks for nothing is cut back
   * to what it used and its standing block, and the rest comes back. Decreases
   * free budget only once acknowledged (a client acknowledges only when what
   * it used fits the new budget) or at the window's end; a block sent is
   * counted as used until then, whatever becomes of its client.
   */
  #quotaRound(r: ResourceState, sharing: readonly Entry[], reserved: number, nowMs: number): void {
    const s = r.settings
    const window = this.#quotaClock(s.quotaWindow!, nowMs)
    const leftMs = Math.max(0, window.endMs - nowMs - s.graceMs)
    const horizonSec = Math.min(leftMs, 2 * s.refreshMs) / 1000
    let usedAll = 0
    const used = sharing.map((e) => {
      const u = e.usedWindow === window.index ? e.used : 0
      usedAll += u
      return u
    })
    const left = Math.max(0, s.capacity - reserved - usedAll)
    const standingBlock = horizonSec > 0 ? quotaStandingBlock(s.capacity) : 0
    const result = allocate({
      capacity: wholeSlots(left),
      algorithm: 'fair-share',
      surplus: 'hold',
      tenants: s.tenants,
      clients: sharing.map((e) => ({
        id: e.client.key,
        // At least a standing block, so a process that has not asked yet (or not lately)
        // admits its next request without a round trip while the budget lasts.
        wants: Math.max(e.history.estimate() * horizonSec, standingBlock),
        weight: e.weight,
        priority: e.priority,
        tenant:
          e.client.tenant !== undefined && Object.hasOwn(s.tenants, e.client.tenant)
            ? e.client.tenant
            : undefined,
      })),
    })
    const blocks = wholeUnits(result.grants)
    for (let i = 0; i < sharing.length; i++) sharing[i]!.target = used[i]! + blocks[i]!
    const eps = r.epsilon
    for (const e of sharing) if (e.target < e.newest - eps) this.#send(e, e.target, nowMs)
    r.clearStarved()
    for (const e of sharing) if (e.target > e.newest + eps) r.starve(e)
    this.#grantIncreases(r, nowMs, true)
    for (const e of sharing) if (e.leases.length === 0) this.#send(e, 0, nowMs)
  }

  /**
   * A keyed quota's own round: each holder's default share of every key's
   * budget for the window (a fraction; capacity 1 is every key's whole
   * budget). A share sent in a window is never taken back within it: a
   * process cannot say what it spent of a million keys, so its share counts
   * as spent of every key until the window ends, whatever becomes of it. A
   * share may grow, up to the holder's weighted part among the default
   * holders (defaultHolders) and one holder more, out of what no share of
   * the window holds. The one more is room for a process that comes
   * mid-window (a gateway restarted, whose old share stays spent, or one
   * added), so it too decides new keys at once; one that comes once the
   * shares took everything gets none, and asks per key (its keys are leased
   * on their own). Every holder without a
   * lease of this window gets one, at 0 where nothing is free: with it go
   * leases of the family's hot keys (#withFamilyLease), so no process takes
   * a default share of a key that is leased on its own in the window.
   */
  #familyQuotaRound(
    r: ResourceState,
    sharing: readonly Entry[],
    windowIndex: number,
    nowMs: number,
  ): void {
    const defaults = defaultHolders(r, sharing)
    // The holders that share, those that hold a share of this window without sharing now (gone,
    // or replaced: theirs stays spent), and one more of the largest weight: room for one that
    // comes later. Counting the absent keeps their part from going to the others as growth.
    let weights = 0
    let spare = 0
    for (let i = 0; i < sharing.length; i++)
      if (defaults[i]! > 0) {
        weights += sharing[i]!.weight
        spare = Math.max(spare, sharing[i]!.weight)
      }
    const shares = new Set(sharing)
    for (const e of r.entries.values())
      if (e.leaseWindow === windowIndex && e.committed > 0 && !shares.has(e)) weights += e.weight
    weights += spare
    const whole = r.settings.family!.defaultShare ?? 1
    for (let i = 0; i < sharing.length; i++) {
      const e = sharing[i]!
      const fair = defaults[i]! > 0 ? (whole * e.weight) / weights : 0
      // What it holds of an earlier window is no share of this one (it lapses with its window).
      e.target = Math.max(e.leaseWindow === windowIndex ? e.newest : 0, fair)
    }
    const eps = r.epsilon
    r.clearStarved()
    for (const e of sharing) if (e.target > e.newest + eps) r.starve(e)
    this.#grantIncreases(r, nowMs, true)
    // A holder the increases did not reach gets this window's lease all the same: its fair part
    // where an earlier window's lease still holds that much, else what it has (0 at a start).
    for (const e of sharing)
      if (e.leaseWindow !== windowIndex) this.#send(e, Math.min(e.target, e.newest), nowMs)
  }

  /**
   * Surplus spread: a lease whose new target differs from it only in the
   * headroom above its client's demand, and by at most `tolerance` of the
   * target, stays as it is (it is renewed, not changed). Under demand that
   * varies from report to report, every spread target moves every round;
   * sending each move costs a lease and an ack per client per round, and
   * gives nobody capacity it needs. Exact where it matters: when a client
   * holds less than min(its demand, its target) and free capacity cannot
   * make up every such shortfall, nothing is kept and every change goes out.
   * A kept lease always covers its client's demand (or target), so each
   * client's max-min share of its demand is delivered as before; only
   * headroom lags, by at most `tolerance`.
   *
   * A lease kept below its target leaves capacity to the others; one kept
   * above it holds capacity some other target may need. So the first are
   * all kept, and the second only while the targets still fit in `shared`
   * (what the round shared out): otherwise a client whose lease is far below
   * its target could never be granted it (a holding 27 of 27, kept against a
   * target of 26.5, left d at 0 against its 0.5 for good).
   */
  #keepClose(
    r: ResourceState,
    sharing: readonly Entry[],
    clients: readonly ClientDemand[],
    tolerance: number,
    shared: number,
  ): void {
    const eps = r.epsilon
    let shortfall = 0
    let targets = 0
    for (let i = 0; i < sharing.length; i++) {
      const e = sharing[i]!
      targets += e.target
      const need = Math.min(clients[i]!.wants, e.target)
      if (e.newest < need - eps) shortfall += e.target - e.newest
    }
    if (shortfall > r.settings.capacity - r.committedSum + eps) return
    for (let pass = 0; pass < 2; pass++)
      for (let i = 0; i < sharing.length; i++) {
        const e = sharing[i]!
        const above = e.newest > e.target
        if (above !== (pass === 1) || !this.#keepable(e, clients[i]!.wants, tolerance)) continue
        // Pass 1 keeps a lease above its target only while every target still fits.
        if (above && targets + (e.newest - e.target) > shared + eps) continue
        targets += e.newest - e.target
        e.target = e.newest
      }
  }

  /** A lease in force (not lapsed to its fallback) that covers its demand, within `tolerance` of its target. */
  #keepable(e: Entry, wants: number, tolerance: number): boolean {
    const eps = e.resource.epsilon
    const last = e.leases.at(-1)
    if (last === undefined || Math.abs(last.capacity - e.newest) > eps) return false
    if (e.newest < Math.min(wants, e.target) - eps) return false
    return Math.abs(e.target - e.newest) <= tolerance * e.target
  }

  /** Drops lapsed leases everywhere, and forgets what nothing holds any more. */
  sweep(nowMs: number): void {
    for (const r of this.#resources.values()) this.#sweep(r, nowMs)
    for (const [id, q] of this.#quietAfter)
      if (nowMs >= q.heldUntilMs + q.refillMs) this.#quietAfter.delete(id)
  }

  /**
   * Grants what free capacity allows to the clients whose target is above
   * their lease, first come first served. `partial`: a client may get part
   * of its increase (a round, after which nothing more is expected soon).
   * Without it (as acks and releases free capacity), only whole increases
   * go out: a round's decreases are acknowledged within a round trip, and
   * granting each ack's sliver at once sent a client several leases for one
   * increase (docs/benchmarks.md, Noisy demand under contention: at 10,000
   * clients the coordinator saturated). What acks cannot complete goes out
   * in part shortly after (`takeWaiting`).
   */
  #grantIncreases(r: ResourceState, nowMs: number, partial: boolean): void {
    if (r.starved.size === 0) return
    const eps = r.epsilon
    let free = r.settings.capacity - r.committedSum
    for (const e of r.starved) {
      if (!e.client.connected || e.target <= e.newest + eps) {
        r.unstarve(e)
        continue
      }
      if (free <= eps) break
      // The new lease may raise this client's committed from e.committed to at most e.committed + free.
      const grant = Math.min(e.target, e.committed + free)
      if (grant <= e.newest + eps || (!partial && grant < e.target - eps)) continue
      const before = e.committed
      this.#send(e, grant, nowMs)
      free -= e.committed - before
      if (grant >= e.target - eps) r.unstarve(e)
    }
    if (!partial && free > eps && r.starved.size > 0) this.#waiting.add(r.settings.id)
  }

  #sweep(r: ResourceState, nowMs: number): void {
    let sum = 0
    for (const e of r.entries.values()) {
      if (e.refresh(nowMs)) this.#touch(e)
      sum += e.committed
    }
    r.committedSum = sum
    const isKey = r.settings.family?.role === 'key'
    if (isKey && this.#keyIsCold(r, nowMs)) return this.#retireKey(r)
    for (const e of r.entries.values()) {
      if (!e.client.connected && e.leases.length === 0) this.#unsubscribe(e)
      else if (isKey && this.#idleKey(e, nowMs)) {
        r.noteIdle(e.client.key)
        this.#unsubscribe(e)
      }
    }
  }

  /**
   * What a client asks of a key now, for its round: its estimated demand,
   * but none once it has not reported the key for three refresh periods (a
   * client reports a key only while it asks for it, so an estimate that
   * decays toward 0 would otherwise never reach it), and none below the
   * resource's epsilon.
   */
  #demandOf(e: Entry, nowMs: number): number {
    if (nowMs - e.reportedMs > 3 * e.resource.settings.refreshMs) return 0
    const d = e.history.estimate()
    return d > e.resource.epsilon ? d : 0
  }

  /**
   * A key's entry that holds nothing and is asked for nothing, every lease of
   * it acknowledged, while others still use the key: the client enforces 0
   * for the key (it goes back to its default share only when the whole key
   * does, #retireKey), so the entry is dropped and the client noted; it comes
   * back as a new entry when it asks for the key again.
   */
  #idleKey(e: Entry, nowMs: number): boolean {
    return (
      e.client.connected &&
      e.committed === 0 &&
      e.leases.every((l) => l.acked) &&
      this.#demandOf(e, nowMs) === 0
    )
  }

  /**
   * Whether a key has gone cold: nobody asks for it, and no lease of it
   * commits anything (so nobody may enforce more than 0 of it by its own
   * lease). Never while it learns.
   */
  #keyIsCold(r: ResourceState, nowMs: number): boolean {
    if (nowMs < r.learningUntilMs) return false
    for (const e of r.entries.values())
      if (e.committedAt(nowMs) > 0 || this.#demandOf(e, nowMs) > 0) return false
    return true
  }

  /**
   * A cold key goes back to the default split: its holders are told
   * (`toDefault`: the key's own lease is dropped, the default share rules it
   * again) and it leaves the pool, freeing its hot-key slot. Safe at once:
   * every holder enforces 0 of the key by its own lease (#keyIsCold), so
   * whether it has heard yet or not, what it may enforce is 0 or its default
   * share, which the family's own resource counts.
   */
  #retireKey(r: ResourceState): void {
    const familyId = r.settings.family!.familyId
    const told = new Set<ClientState>()
    for (const e of r.entries.values()) {
      if (e.client.connected) told.add(e.client)
      this.#unsubscribe(e)
    }
    for (const key of r.idleClients) {
      const client = this.#clients.get(key)
      if (client?.connected === true) told.add(client)
    }
    for (const client of told)
      if (client.entries.has(familyId)) this.#sendToDefault(client, r.settings)
    this.#forget(r)
  }

  /** A lease that sends a key back to the client's default share (see #retireKey). */
  #sendToDefault(client: ClientState, s: ResourceSettings): void {
    this.#batchOf(client).leases.push({
      resource: s.id,
      kind: s.kind,
      capacity: 0,
      burst: 0,
      ttlMs: 0,
      refreshMs: s.refreshMs,
      safeCapacity: 0,
      safeHoldMs: 0,
      toDefault: true,
    })
  }

  /** A resource with no entries left leaves the pool (and its family's hot keys). */
  #forget(r: ResourceState): void {
    this.#resources.delete(r.settings.id)
    // Until the resource is quiet, a new state of it must know when its last lease may end.
    const refillMs = burstRefillMs(r.settings)
    if (refillMs < Infinity && r.heldUntilMs > -Infinity)
      this.#quietAfter.set(r.settings.id, { heldUntilMs: r.heldUntilMs, refillMs })
    const family = r.settings.family
    if (family?.role !== 'key') return
    const keys = this.#familyKeys.get(family.familyId)
    if (keys?.delete(r) === true && r.hotFor !== undefined) {
      const slot = hotSlotKey(family.familyId, r.hotFor)
      const n = (this.#hotKeysByTenant.get(slot) ?? 1) - 1
      if (n > 0) this.#hotKeysByTenant.set(slot, n)
      else this.#hotKeysByTenant.delete(slot)
    }
    if (keys?.size === 0) this.#familyKeys.delete(family.familyId)
  }

  /**
   * How many keys of a family are leased one by one now (its hot keys); of those, with
   * `tenant`, how many that tenant's clients made hot (its slots).
   */
  hotKeyCount(familyId: string, tenant?: string): number {
    if (tenant !== undefined) return this.#hotKeysByTenant.get(hotSlotKey(familyId, tenant)) ?? 0
    return this.#familyKeys.get(familyId)?.size ?? 0
  }

  /**
   * A key of a family becomes hot: until now every holder of the family has
   * enforced its default share of it (share × the key's capacity). Each
   * holder gets an entry for the key that inherits what its family lease
   * commits, scaled to the key (so it counts until the holder acknowledges
   * a lease of the key, or its family lease of the time lapses), and at once
   * an explicit lease of the key at that same value (no change where it is
   * enforced). From then on the key is shared like any resource: the next
   * round moves capacity to those who use it, through decrease, ack (or
   * lapse), increase; the client enforces the key's own lease, never its
   * default share again.
   */
  #seedKey(r: ResourceState, nowMs: number): void {
    const family = r.settings.family!
    const holders = this.#resources.get(family.familyId)
    if (holders === undefined) return
    for (const fe of holders.entries.values()) {
      if (fe.leases.length === 0) continue
      const entry = this.#subscribe(fe.client, r.settings.id, r.settings)
      const scale = r.settings.capacity
      entry.restore(
        fe.leases.map((l) => ({
          ...l,
          seq: 0,
          acked: true,
          capacity: inKindUnits(r.settings.kind, l.capacity * scale),
          fallback: inKindUnits(r.settings.kind, l.fallback * scale),
        })),
        nowMs,
      )
      this.#touch(entry)
      this.#send(entry, entry.newest, nowMs)
    }
  }

  #subscribe(client: ClientState, resourceId: string, settings: ResourceSettings): Entry {
    let entry = client.entries.get(resourceId)
    if (entry !== undefined) return entry
    let r = this.#resources.get(resourceId)
    if (r === undefined) {
      // Learning runs for learningMs after the coordinator starts, whenever the resource first appears.
      r = new ResourceState(
        settings,
        this.#startMs + (this.#learn ? settings.learningMs : 0),
        Math.max(this.#quietSinceMs, this.#quietAfter.get(resourceId)?.heldUntilMs ?? -Infinity),
      )
      this.#quietAfter.delete(resourceId)
      this.#resources.set(resourceId, r)
      const family = settings.family
      if (family?.role === 'key') {
        let keys = this.#familyKeys.get(family.familyId)
        if (keys === undefined) this.#familyKeys.set(family.familyId, (keys = new Set()))
        keys.add(r)
        // Its hot-key slot is the tenant's whose client made it hot.
        if (client.tenant !== undefined) {
          r.hotFor = client.tenant
          const slot = hotSlotKey(family.familyId, client.tenant)
          this.#hotKeysByTenant.set(slot, (this.#hotKeysByTenant.get(slot) ?? 0) + 1)
        }
      }
    } else if (settings.family?.role === 'key') r.unnoteIdle(client.key)
    entry = new Entry(client, r)
    if (settings.family?.role === 'key') client.keyEntries++
    client.entries.set(resourceId, entry)
    r.entries.set(client.key, entry)
    if (client.tenant !== undefined) {
      let used = this.#tenantResources.get(client.tenant)
      if (used === undefined)
        this.#tenantResources.set(client.tenant, (used = new Map<string, number>()))
      used.set(resourceId, (used.get(resourceId) ?? 0) + 1)
    }
    return entry
  }

  #unsubscribe(entry: Entry): void {
    const { client, resource } = entry
    resource.unclaim(entry)
    if (resource.settings.family?.role === 'key') client.keyEntries--
    const used = client.tenant === undefined ? undefined : this.#tenantResources.get(client.tenant)
    if (used !== undefined) {
      const n = (used.get(resource.settings.id) ?? 1) - 1
      if (n > 0) used.set(resource.settings.id, n)
      else used.delete(resource.settings.id)
      if (used.size === 0) this.#tenantResources.delete(client.tenant!)
    }
    this.#dirty.delete(entry)
    this.#gone({ clientKey: client.key, resource: resource.settings.id })
    client.entries.delete(resource.settings.id)
    resource.entries.delete(client.key)
    resource.unstarve(entry)
    resource.committedSum -= entry.committed
    if (client.entries.size === 0 && !client.connected) this.#clients.delete(client.key)
  }

  /**
   * Moves `entries` of a client (all that a replaced process holds, or a
   * quota it released) under a key of their own, disconnected: they count
   * until they lapse, and nothing the client does next frees them.
   */
  #setAside(client: ClientState, entries: readonly Entry[], nowMs: number): void {
    if (entries.length === 0) return
    // A key no client has, restored ones included (a ledger may hold set-aside clients too).
    let asideKey: string
    do asideKey = `${client.key}\u0001${++this.#replaced}`
    while (this.#clients.has(asideKey))
    const aside = new ClientState(asideKey, client.clientId, client.tenant)
    aside.connected = false
    this.#clients.set(aside.key, aside)
    for (const entry of entries) {
      const r = entry.resource
      this.#dirty.delete(entry)
      this.#gone({ clientKey: client.key, resource: r.settings.id })
      const moved = new Entry(aside, r)
      moved.leases = entry.leases
      moved.weight = entry.weight
      moved.priority = entry.priority
      moved.used = entry.used
      moved.usedWindow = entry.usedWindow
      moved.leaseWindow = entry.leaseWindow
      if (client.entries.get(r.settings.id) === entry) client.entries.delete(r.settings.id)
      if (r.settings.family?.role === 'key') {
        client.keyEntries--
        aside.keyEntries++
      }
      r.entries.delete(client.key)
      r.unstarve(entry)
      r.committedSum -= entry.committed
      r.entries.set(aside.key, moved)
      aside.entries.set(r.settings.id, moved)
      moved.disconnected(nowMs)
      moved.refresh(nowMs)
      this.#touch(moved)
    }
  }

  #send(entry: Entry, capacity: number, nowMs: number): void {
    const s = entry.resource.settings
    if (s.family?.role !== 'family') return this.#sendOne(entry, capacity, nowMs)
    // A keyed quota's holder starts anew each window: its first family lease of a window is a first.
    const window = s.quotaWindow === undefined ? undefined : this.#quotaClock(s.quotaWindow, nowMs)
    const first =
      window === undefined ? entry.leases.length === 0 : entry.leaseWindow !== window.index
    // On a new connection the holder may know none of its key leases (a batch that carried them
    // was lost with the old one, or a restored pool took them for acknowledged): they go again.
    const again = entry.resendDue
    this.#sendOne(entry, capacity, nowMs)
    this.#withFamilyLease(entry, first, again, window?.index, nowMs)
  }

  /**
   * A family lease goes out: the holder may extend its default share of every
   * key with it, so the same batch carries what it must know of the hot keys.
   * A new holder gets a lease of 0 for each (it never enforces a default for
   * them); a known one, again, each key lease it has not acknowledged yet.
   * A keyed quota's holder is new in each window (`windowIndex`): a key
   * leased to it in an earlier window gets a lease of 0 for this one, or it
   * would take its new default share of a key leased on its own. A family
   * lease renewed on a new connection (`again`) carries every key lease the
   * holder has: the client may have none of them (found by the keyed quota
   * model: after a restart, a holder whose first batch was lost took its
   * default share of a hot key the pool counted at 1 for it, 13 of 12).
   */
  #withFamilyLease(
    entry: Entry,
    first: boolean,
    again: boolean,
    windowIndex: number | undefined,
    nowMs: number,
  ): void {
    const keys = this.#familyKeys.get(entry.resource.settings.id)
    if (keys === undefined) return
    const seq = this.#batches.get(entry.client)?.seq
    for (const r of keys) {
      const e = entry.client.entries.get(r.settings.id)
      // A keyed quota's key nobody asks for is not carried into a new window: it goes back to
      // the default split now (its leases of the window before have run out).
      if (
        windowIndex !== undefined &&
        e?.leaseWindow !== windowIndex &&
        this.#keyIsCold(r, nowMs)
      ) {
        this.#retireKey(r)
        continue
      }
      if (e === undefined) {
        if (first) this.#sendOne(this.#subscribe(entry.client, r.settings.id, r.settings), 0, nowMs)
      } else if (windowIndex !== undefined && e.leaseWindow !== windowIndex)
        this.#sendOne(e, 0, nowMs)
      else if (e.leases.at(-1)?.acked !== true || (again && e.leases.at(-1)?.seq !== seq))
        this.#sendOne(e, e.newest, nowMs)
    }
  }

  /** The batch going to `client` in this flush, made on first use. */
  #batchOf(client: ClientState): LeaseBatch {
    let batch = this.#batches.get(client)
    if (batch === undefined) {
      batch = { clientKey: client.key, seq: ++this.#lastSeq, leases: [] }
      client.lastSentSeq = batch.seq
      this.#batches.set(client, batch)
    }
    return batch
  }

  #sendOne(entry: Entry, capacity: number, nowMs: number): void {
    const batch = this.#batchOf(entry.client)
    const s = entry.resource.settings
    // One lease of a resource per batch: a second one in the same flush replaces the first in
    // the message (both stay counted until the ack, which is the last one's: Entry.acknowledge).
    const earlier = batch.leases.findIndex((l) => l.resource === s.id)
    if (earlier >= 0) batch.leases.splice(earlier, 1)
    // A quota's block is spent until the window ends (less the grace, so no unit spills into
    // the next window): that is its life, and it is counted until the window ends.
    const window = s.quotaWindow === undefined ? undefined : this.#quotaClock(s.quotaWindow, nowMs)
    const ttlMs =
      window === undefined
        ? leaseTtlMsAt(s, nowMs)
        : Math.max(0, Math.floor(window.endMs - nowMs - s.graceMs))
    // Before this lease is recorded (which marks the resource held): may its bucket start full?
    const full =
      window === undefined &&
      capacity > 0 &&
      entry.leases.length === 0 &&
      this.#quietFor(entry.resource, nowMs)
    // The fallback never exceeds the lease: what a silent client may enforce is what it was leased.
    const safeShare = s.safeCapacity ?? s.capacity / Math.max(1, entry.resource.entries.size)
    const safeCapacity = Math.min(capacity, inKindUnits(s.kind, safeShare))
    entry.record(batch.seq, capacity, safeCapacity, ttlMs, nowMs, this.#sendDelayMs)
    if (window !== undefined) entry.leaseWindow = window.index
    this.#touch(entry)
    const share = s.capacity > 0 ? capacity / s.capacity : 0
    batch.leases.push({
      resource: s.id,
      kind: s.kind,
      capacity,
      burst: kindTraits[s.kind].refills ? s.burst * share : capacity,
      ttlMs,
      refreshMs: s.refreshMs,
      safeCapacity,
      safeHoldMs: s.safeHoldMs,
      ...(full ? { full: true as const } : {}),
      ...(s.family?.role === 'family' ? { family: familyPayload(s.family) } : {}),
      ...(window === undefined
        ? s.family?.role === 'family'
          ? {}
          : {
              limit: {
                capacity: s.capacity,
                burst: kindTraits[s.kind].refills ? s.burst : s.capacity,
              },
            }
        : {
            window: {
              index: window.index,
              endsInMs: ttlMs,
              quota: s.capacity,
              lengthMs: Math.round(window.endMs - window.startMs),
            },
          }),
    })
  }

  /**
   * Whether a rate lease sent now may start its bucket full: nobody could enforce any of the
   * resource (no lease, no fallback, no learning) for the burst's refill time before now, so
   * no token of the burst was spent in it and the bound capacity·t + burst holds over any
   * interval (docs/allocation.md). Every grant of the round that finds it so may (together
   * they hold at most the capacity, so at most the burst); the next round sees them held.
   * Never for a keyed family or its hot keys (burstRefillMs).
   */
  #quietFor(r: ResourceState, nowMs: number): boolean {
    if (r.fullAtMs === nowMs) return true
    const refillMs = burstRefillMs(r.settings)
    if (!(refillMs < Infinity)) return false
    // While a resource learns, the pool does not know what is held: quiet from its end at the
    // earliest. A pool that never learned knows every lease from its quietSinceMs on.
    const quietFromMs =
      r.learningUntilMs > this.#startMs ? Math.max(r.heldUntilMs, r.learningUntilMs) : r.heldUntilMs
    if (nowMs < quietFromMs + refillMs) return false
    r.fullAtMs = nowMs
    return true
  }

  #flush(): readonly LeaseBatch[] {
    if (this.#batches.size === 0) return noBatches
    const out = [...this.#batches.values()]
    this.#batches = new Map()
    return out
  }
}
