import { randomUUID } from 'node:crypto'
import { inKindUnits, kindTraits, shareOfKey } from '../../shared/index.js'
import { isFamilyKey } from '../config/index.js'
import { ClientState, type Entry, type ResourceState } from './entry.js'
import { promoteDue } from './ahead.js'
import { renewLate } from './edge-renewal.js'
import { seedKey } from './hot-keys.js'
import { heldVacancy, heldWithin, type HeldVacancy } from './held-handover.js'
import { grantIncreases } from './increases.js'
import { send } from './lease-out.js'
import { setAside, subscribe, unsubscribe } from './registry.js'
import { offerSpent } from './spent-decrease.js'
import { deadCentralSpent } from './central-spend.js'
import { centralClientId } from './shapes/index.js'
import { noResources, type LeaseBatch, type PoolState } from './state.js'

/**
 * What a client's messages do to the pool: it connects (the same process
 * keeps its leases, another is a takeover), claims its holdings in a hello,
 * reports demand (and a quota's use), acknowledges leases, releases
 * resources, and disconnects. Each function leaves the leases it sends in
 * the pool's batches, for `Pool` to flush.
 */

export interface DemandReport {
  readonly resource: string
  readonly wants: number
  /** Quota: units used in `window` so far. */
  readonly used?: number | undefined
  /** A keyed quota's key: of `used`, units spent by others and handed on with a share. */
  readonly charged?: number | undefined
  readonly window?: number | undefined
  readonly weight?: number | undefined
  readonly priority?: number | undefined
  /** A keyed family's entry: the client asks the coordinator what its part cannot decide. */
  readonly remote?: boolean | undefined
  /** A key leased to the client on its own that it never asked for (shared/protocol/messages.ts). */
  readonly unasked?: true | undefined
  /** A key whose checks wait at the client for its own lease (shared/protocol/messages.ts). */
  readonly waits?: true | undefined
}

/** A keyed quota family's release: what its holder spent of each key by its share in `window`. */
export interface SpentReport {
  readonly resource: string
  readonly window: number
  /** A named quota's units used in `window`. */
  readonly used?: number | undefined
  /** A keyed quota's key: of `used`, units handed on to the client as spent by others. */
  readonly charged?: number | undefined
  /** A keyed quota family's keys spent by its default share in `window`. */
  readonly keys?: readonly (readonly [string, number])[] | undefined
}

/** A rate family's release: what its holder's share still held (held-handover.ts). */
export interface HeldReport {
  readonly resource: string
  /** Of every key not named, this share of its burst. */
  readonly level: number
  /** Keys that held less, and their tokens. */
  readonly keys: readonly (readonly [string, number])[]
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

/** How the connection of a hello relates to what the pool knew of its client id. */
export type ConnectOutcome =
  /** The id was unknown (or forgotten): a fresh client. */
  | 'new'
  /** The same process again (same instance): it keeps its leases. */
  | 'resumed'
  /** Another process took the id: the old one's leases count apart until they lapse. */
  | 'replaced'

/** Newer first: by issue time, then generation; claims without one last. */
function newerFirst(
  a: { issued?: readonly [number, number] | undefined },
  b: { issued?: readonly [number, number] | undefined },
): number {
  const [ta, ga] = a.issued ?? [-Infinity, -Infinity]
  const [tb, gb] = b.issued ?? [-Infinity, -Infinity]
  return tb - ta || gb - ga
}

/**
 * A client (re)connects under `key`. The same process (same `instance`)
 * keeps its leases; batches sent on earlier connections can no longer be
 * acknowledged, and the next report renews every lease on this one. Any
 * other process taking a known key does not inherit what the old one
 * holds: that stays counted, apart, until it lapses.
 */
export function connect(
  pool: PoolState,
  key: string,
  clientId: string,
  tenant: string | undefined,
  instance: string | undefined,
  nowMs: number,
): ConnectOutcome {
  let client = pool.clients.get(key)
  let outcome: ConnectOutcome = 'new'
  if (client !== undefined) {
    if (instance !== undefined && client.instance === instance) outcome = 'resumed'
    else {
      if (clientId === centralClientId) freeDeadCentral(pool, client, nowMs)
      pool.clients.delete(client.key)
      setAside(pool, client, [...client.entries.values()], nowMs)
      client = undefined
      outcome = 'replaced'
    }
  }
  if (client === undefined) {
    client = new ClientState(key, clientId, tenant, instance)
    pool.clients.set(key, client)
  }
  client.connected = true
  client.sinceSeq = pool.lastSeq + 1
  for (const e of client.entries.values()) {
    e.reconnected(nowMs)
    pool.touch(e)
  }
  return outcome
}

/**
 * The coordinator's own part (server/coordinator/central.ts) taken over by a new one: the old
 * one admits nothing any more, so its rate leases are freed as a clean release frees them, not
 * counted apart until they lapse. Before, after a coordinator restart a crowded family (whose
 * processes the coordinator's part decides for) admitted nothing until the restored leases of
 * the dead part lapsed: 6 to 10 s with 6 s leases (the keyed fault scenario, crowded).
 *
 * Why the old one admits nothing: only the coordinator's in-process session may use this id
 * (admission.ts), and each coordinator process has its own part. A new one comes (1) in a new
 * process that restored the ledger: the previous process is dead (a file ledger's flock is
 * held until it dies), or under high availability it stepped down before any message after
 * its fence (a replica is elected only after that), and a step-down closes its part; or (2) in
 * this process after its part failed and closed. Its buckets could have been spent just
 * before, as a releasing process's: a release's path keeps the bound for exactly that (the new
 * part's first lease starts from what of the burst nobody may hold, after a restart nothing).
 *
 * A keyed quota's part is released as a clean close releases it, saying what it spent: what it
 * wrote as reserved before answering (central-spend.ts), so its share is handed on less that
 * and its keys leased on their own keep only that. A quota's part it cannot vouch for is set
 * aside with the rest, as any replaced process's: what it spent of its window died with it (a
 * share sent in a window is spent of every key until the window ends, keyed-quota-share.ts).
 */
function freeDeadCentral(pool: PoolState, client: ClientState, nowMs: number): void {
  const ids: string[] = []
  for (const e of client.entries.values())
    if (e.resource.settings.kind === 'rate' && e.resource.settings.quotaWindow === undefined)
      ids.push(e.resource.settings.id)
  const quota = deadCentralSpent(pool, client, nowMs)
  ids.push(...quota.ids)
  if (ids.length > 0) release(pool, client.key, ids, nowMs, quota.spent)
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
export function learnHoldings(
  pool: PoolState,
  key: string,
  holdings: readonly Holding[],
  nowMs: number,
): void {
  const client = pool.clients.get(key)
  if (client === undefined) return
  const touched = new Set<ResourceState>()
  for (const h of holdings) {
    const settings = pool.settingsFor(h.resource)
    if (settings === undefined) continue
    const entry = subscribe(pool, client, h.resource, settings)
    const r = entry.resource
    if (nowMs >= r.learningUntilMs || entry.leases.length > 0) continue
    r.claim(entry, {
      capacity: Math.max(h.capacity, h.inFlight ?? 0),
      issued: h.issued,
      accepted: 0,
    })
    touched.add(r)
  }
  for (const r of touched) settleClaims(pool, r, nowMs)
}

/** Shares a learning resource's capacity among its claims, newest first (see learnHoldings). */
function settleClaims(pool: PoolState, r: ResourceState, nowMs: number): void {
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
    if (first || accepted < entry.newest - r.epsilon) send(pool, entry, accepted, nowMs)
  }
}

/**
 * A demand report: records each resource's demand (subscribing the client
 * to resources it has not used before) and renews the client's leases on
 * the reported resources once a third to a half of their life has passed (at once
 * after a reconnect). Returns the renewal batch and the resources that
 * deserve a prompt round (new subscriptions).
 */
export function reportDemand(
  pool: PoolState,
  key: string,
  reports: readonly DemandReport[],
  nowMs: number,
  n?: number,
  rttMs?: number,
  sentAtMs?: number,
): {
  newResources: readonly string[]
  /** Reports whose `used` passed what the client was ever leased (counted as that much). */
  overReported: readonly string[]
} {
  const client = pool.clients.get(key)
  if (client === undefined) return { newResources: noResources, overReported: noResources }
  // Before any lease this report renews: their window edges are measured from it.
  if (n !== undefined) client.noteReport(n, nowMs, sentAtMs)
  if (rttMs !== undefined) client.rttMs = rttMs
  let newResources: string[] | undefined
  let overReported: string[] | undefined
  for (const report of reports) {
    let entry = client.entries.get(report.resource)
    if (entry === undefined) {
      const settings = pool.settingsFor(report.resource)
      if (settings === undefined) continue
      const hot = isFamilyKey(settings) && !pool.resources.has(report.resource)
      entry = subscribe(pool, client, report.resource, settings)
      // Hot by this report, with checks waiting for it there: its seed says a rise may come
      // (entry.ts), and the others' seeds ask them to say at once whether they ask (`reportNow`).
      if (hot) {
        const asks = (entry.riseAsked = report.wants > 0 && report.waits === true)
        seedKey(pool, entry.resource, nowMs, (e, c, n) => send(pool, e, c, n, asks && !e.riseAsked))
      }
      ;(newResources ??= []).push(report.resource)
    }
    entry.history.record(report.wants)
    // A seeded holder that says it never asked for the key, in its first report since the seed.
    if (entry.reportedMs < entry.seededMs) entry.seedUnasked = report.unasked === true
    entry.reportedMs = Math.floor(nowMs)
    if (report.used !== undefined && report.window !== undefined) {
      // What a client says it used is held to what it was ever leased of the window, and what
      // it says it was handed as spent by a leaver (handover.ts; never more than its share of
      // the family allows it of the key): a larger count (a bug, or a client taking the rest of
      // a shared budget by reporting it spent) is counted as that much, and answered with an
      // error. A count of another window than the one in force is not kept (`recordUsed`), and
      // not checked: its leases are gone.
      const handed = Math.min(report.charged ?? 0, familyPartOf(entry))
      const most = Math.max(entry.used, entry.heldMost() + handed)
      const used = Math.min(report.used, most)
      if (
        report.used > most + entry.resource.epsilon &&
        pool.windowOf(entry.resource, nowMs)?.index === report.window
      )
        (overReported ??= []).push(report.resource)
      recordUsed(pool, entry, used, report.window, nowMs)
      if (report.charged !== undefined && entry.usedWindow === report.window)
        entry.charged = Math.min(report.charged, entry.used)
    }
    if (report.weight !== undefined) entry.weight = report.weight
    if (report.priority !== undefined) entry.priority = report.priority
    entry.decidesRemotely = report.remote === true
    if (report.wants > 0) entry.hasChecked = true
    entry.refresh(nowMs)
    // A quota's decrease this report shows it cannot acknowledge: what it used, at once.
    if (report.used !== undefined && offerSpent(pool, entry, nowMs)) continue
    // Renew once a third to a half of the lease's life has passed (Entry.renewDue): the client
    // keeps half or more in hand against lost messages, and a report a second costs a reply
    // only every few seconds.
    // A block sent ahead of this window is the lease renewed (ahead.ts).
    promoteDue(pool, entry, nowMs)
    if (
      entry.leases.length > 0 &&
      (entry.resendDue || entry.renewDue(nowMs)) &&
      !ofPastWindow(pool, entry, nowMs)
    ) {
      send(pool, entry, entry.newest, nowMs)
    }
  }
  return {
    newResources: newResources ?? noResources,
    overReported: overReported ?? noResources,
  }
}

/**
 * Whether a quota's newest lease is of a window before the one in force: it is not renewed into
 * the new window. A keyed quota's share would carry the old split over (the family's round
 * splits anew); a quota's block, or a hot key's, what the client was leased of a window ended, on
 * top of the new window's blocks (its round, or its family's lease, tells the client of the new
 * window).
 */
function ofPastWindow(pool: PoolState, entry: Entry, nowMs: number): boolean {
  const window = pool.windowOf(entry.resource, nowMs)
  if (window === undefined) return false
  return entry.resource.shape.familyShare
    ? entry.leaseWindow !== window.index
    : entry.leasedBefore(window.index)
}

/**
 * The client put the leases of batch `seq` in force: of every resource in
 * the batch, or only of `resources` when given. Each frees the older leases
 * of its own resource, never another's; a batch sent on an earlier
 * connection is not acknowledged on this one. Grants what now fits.
 */
export function acknowledge(
  pool: PoolState,
  key: string,
  seq: number,
  resources: readonly string[] | undefined,
  nowMs: number,
  gave?: readonly (readonly [string, number])[],
  held?: readonly FallHeld[],
): void {
  const client = pool.clients.get(key)
  if (client === undefined || seq < client.sinceSeq || seq > client.lastSentSeq) return
  const touched = new Set<ResourceState>()
  // What the falls gave up, summed per resource once (an ack may name many).
  const given = gave === undefined || gave.length === 0 ? undefined : sumGiven(gave)
  const ack = (entry: Entry): void => {
    const before = entry.committed
    if (entry.acknowledge(seq, nowMs)) {
      pool.touch(entry)
      renewLate(pool, entry, nowMs)
      if (entry.committed < before) {
        touched.add(entry.resource)
        if (given !== undefined) noteGiven(pool, entry, before, given, nowMs)
        if (held !== undefined) noteFallHeld(pool, entry, before, held, seq, nowMs)
      }
    }
  }
  if (resources === undefined) for (const entry of client.entries.values()) ack(entry)
  else
    for (const id of resources) {
      const entry = client.entries.get(id)
      if (entry !== undefined) ack(entry)
    }
  for (const r of touched) grantIncreases(pool, r, nowMs, false)
  pool.handBack.clear()
}

/**
 * A named rate's holder, or a rate family's key leased on its own, says what its bucket gave up
 * as this ack's lease fell: held for the rises granted while the ack is handled (lease-out.ts),
 * never more than the fall's share of the burst (what the slices that fell could hold; a
 * client saying more is held to it). A hot key's fall for a joiner so starts the joiner's lease
 * of it with what the fall gave, not empty (#41, "a 6th joins").
 */
function noteGiven(
  pool: PoolState,
  entry: Entry,
  before: number,
  given: ReadonlyMap<string, number>,
  nowMs: number,
): void {
  const r = entry.resource
  const s = r.settings
  if (r.shape.familyShare || !(s.capacity > 0)) return
  // A hot key has no burst slack (nothing of its burst starts full), but its bucket refills.
  if (r.shape.hotKey ? !kindTraits[s.kind].refills : r.burstSlack === undefined) return
  if (pool.windowOf(r, nowMs) !== undefined) return
  const tokens = given.get(s.id) ?? 0
  const most = ((before - entry.committed) / s.capacity) * s.burst
  const held = Math.min(tokens, most)
  if (!(held > 0)) return
  if (r.shape.hotKey) {
    // Kept until a rise takes them, within the slices that gave them (entry.ts, `giftRoom`).
    const free = Math.max(0, ((s.capacity - r.committedSum) / s.capacity) * s.burst)
    r.giftRoom = Math.min(r.giftRoom + most, free)
    r.giftTokens = Math.min(r.giftTokens + held, r.giftRoom)
  } else pool.handBack.set(s.id, (pool.handBack.get(s.id) ?? 0) + held)
}

/** What a rate family's default share held of the part that fell (an ack's `held`). */
export interface FallHeld {
  readonly resource: string
  readonly level: number
  readonly keys: readonly (readonly [string, number])[]
  /** What it gave goes at this share of each key's rate (at least the share that fell). */
  readonly goesAtShare?: number | undefined
}

/**
 * A rate family's holder says what the part of its default share that fell held (a lease that
 * said `handOn`: a joiner waits): kept for the joiner's first share (fall-gifts.ts), each key's
 * and the level never more than the fall's share of the burst (a client saying more is held
 * to it).
 */
function noteFallHeld(
  pool: PoolState,
  entry: Entry,
  before: number,
  held: readonly FallHeld[],
  seq: number,
  nowMs: number,
): void {
  const r = entry.resource
  const s = r.settings
  const family = s.family
  if (!r.shape.familyShare || r.burstSlack === undefined || !(s.capacity > 0)) return
  if (family?.keyKind !== 'rate' || pool.windowOf(r, nowMs) !== undefined) return
  const said = held.find((h) => h.resource === s.id)
  if (said === undefined) return
  const fell = Math.min(1, Math.max(0, (before - entry.committed) / s.capacity))
  if (!(fell > 0)) return
  // Beyond the fall's share, a share that took a gift passes on the fall's part of it (the
  // client's #giveFallen), going at its part of the gift's rate: never more than that part of
  // the level it took.
  const part = before > 0 ? Math.min(1, (before - entry.committed) / before) : 1
  const given = heldWithin(family, said, fell + part * entry.giftLevel)
  entry.giftLevel *= 1 - part
  // It goes at the rate that fell, or at what the client says when faster (a gift's part going
  // with it, or a key's excess going faster): never slower.
  const goesAtShare = Math.max(fell, said.goesAtShare ?? 0)
  // Its line starts when the fall was sent: the client fell as it came, no sooner, and what it
  // gave would have gone from then as its excess (from the ack, the gift outlived it by the
  // ack's round trip).
  const sentMs = entry.leases.find((l) => l.seq === seq)?.sentMs ?? nowMs
  r.burstSlack.gifts.add(given.level, given.keys, goesAtShare, Math.min(sentMs, nowMs))
}

/** An ack's `gave`, summed per resource (a client naming one twice is summed, then capped). */
function sumGiven(gave: readonly (readonly [string, number])[]): Map<string, number> {
  const sums = new Map<string, number>()
  for (const [id, n] of gave) if (n > 0) sums.set(id, (sums.get(id) ?? 0) + n)
  return sums
}

/**
 * What a keyed quota's holder may have been handed of a key as spent by a leaver: at most its
 * share of the family (the most it was leased of it), of the key's budget. A key leased on its
 * own while the holder was handed a leaver's share (handover.ts) is leased less what the leaver
 * spent of it, and the client reports those units in its use (`charged`): its use may pass
 * what the key's own leases say by that much (found by the keyed quota model: `used` 11 of
 * which 5 charged, against key leases of 6 at most: answered SLUICE_ERR_REPORT_INVALID, and
 * counted as 6).
 */
function familyPartOf(entry: Entry): number {
  const family = entry.resource.settings.family
  if (family === undefined || family.familyId === entry.resource.settings.id) return 0
  const share = entry.client.entries.get(family.familyId)
  if (share === undefined) return 0
  return shareOfKey(
    entry.resource.settings.kind,
    share.heldMost(),
    entry.resource.settings.capacity,
  )
}

/**
 * Batches the pool returned that never left (their ledger write came too
 * late, or failed). Their leases stay counted until they lapse, as sent
 * ones do; the client's next report renews them at once, rather than a
 * renewal period after a lease it never had.
 */
export function unsent(pool: PoolState, batches: readonly LeaseBatch[]): void {
  for (const batch of batches) {
    const client = pool.clients.get(batch.clientKey)
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
export function release(
  pool: PoolState,
  key: string,
  resourceIds: readonly string[],
  nowMs: number,
  spent: readonly SpentReport[] = [],
  held: readonly HeldReport[] = [],
): void {
  const client = pool.clients.get(key)
  if (client === undefined) return
  const touched: ResourceState[] = []
  let aside: Entry[] | undefined
  let vacancies: [Entry, HeldVacancy][] | undefined
  let freed: Entry[] | undefined
  for (const id of resourceIds) {
    const entry = client.entries.get(id)
    if (entry === undefined) continue
    if (entry.resource.settings.quotaWindow !== undefined) {
      // Its part of this window sent ahead and due is its lease of it (ahead.ts): what the
      // release says it spent is of that window.
      promoteDue(pool, entry, nowMs)
      ;(aside ??= []).push(entry)
      continue
    }
    // A rate family's share whose release said what it held may be handed on with it.
    const said = held.find((x) => x.resource === id)
    const vacancy = said && heldVacancy(entry, said, randomUUID(), nowMs)
    if (vacancy !== undefined) {
      ;(vacancies ??= []).push([entry, vacancy])
      continue
    }
    ;(freed ??= []).push(entry)
  }
  // A hot key released with its family's share, the share set aside for an heir: its share of
  // the key waits with it, and goes to the same heir (held-handover.ts).
  let keysAside: Entry[] | undefined
  for (const entry of freed ?? []) {
    const family = entry.resource.settings.family?.familyId
    if (
      entry.resource.shape.hotKey &&
      vacancies?.some(([v]) => v.resource.settings.id === family) === true
    ) {
      ;(keysAside ??= []).push(entry)
      continue
    }
    entry.clear(nowMs)
    unsubscribe(pool, entry)
    touched.push(entry.resource)
  }
  if (aside !== undefined)
    for (const e of setAside(pool, client, aside, nowMs)) {
      const said = spent.find(
        (x) => x.resource === e.resource.settings.id && x.window === e.leaseWindow,
      )
      if (said === undefined) continue
      // A keyed quota's share whose release said what it spent of each key in its window may
      // be handed on (handover.ts).
      if (e.resource.shape.familyShare && said.keys !== undefined) {
        e.vacancy = { window: said.window, keys: said.keys, sinceMs: nowMs, id: randomUUID() }
        // Its share of the next window sent ahead comes back too: it says what it spent of this
        // one, so it spent none of the next (a client that had says nothing: its share stays
        // spent, client/keyed/family.ts `spentInWindow`).
        if (e.ahead !== undefined && e.ahead.window > said.window) {
          e.ahead = undefined
          e.refresh(nowMs)
        }
      }
      // A named quota's block is spent only as far as it was used: the rest comes back.
      else if (!e.resource.shape.familyShare && said.used !== undefined) {
        const charged = e.usedWindow === said.window ? e.charged : 0
        spentOnly(e, Math.max(said.used, e.usedWindow === said.window ? e.used : 0), nowMs)
        // Of what it used, what was handed to it: a key reset gives back only the rest.
        e.charged = Math.min(e.used, Math.max(charged, said.charged ?? 0))
        // Its block of the next window sent ahead comes back too: it says what it used of this
        // one, so it spent none of the next (it would say that window's count once it had
        // opened there: client/enforcer.ts).
        if (e.ahead !== undefined && e.ahead.window > said.window) {
          e.ahead = undefined
          e.refresh(nowMs)
        }
      }
    }
  if (vacancies !== undefined) {
    // One client set aside: the heir finds the keys beside the share.
    const moved = setAside(
      pool,
      client,
      [...vacancies.map(([e]) => e), ...(keysAside ?? [])],
      nowMs,
    )
    for (const [i, e] of moved.entries()) {
      if (i < vacancies.length) e.heldVacancy = vacancies[i]![1]
      touched.push(e.resource)
    }
  }
  for (const r of touched) grantIncreases(pool, r, nowMs, false)
}

/**
 * A released quota's entry counts what its client used of the window, no more: each lease
 * is cut to it (the client promised not to spend again), until the window ends.
 */
function spentOnly(e: Entry, used: number, nowMs: number): void {
  e.restore(
    e.leases.map((l) => ({
      ...l,
      capacity: Math.min(l.capacity, used),
      fallback: Math.min(l.fallback, used),
    })),
    nowMs,
  )
  e.used = used
  e.usedWindow = e.leaseWindow
}

/**
 * The connection is gone. The leases stay committed until they lapse (the
 * process may still be running); its demand drops out of the next round.
 * A client that holds nothing is forgotten at once.
 */
export function disconnect(pool: PoolState, key: string, nowMs: number): string[] {
  const client = pool.clients.get(key)
  if (client === undefined) return []
  client.connected = false
  for (const e of client.entries.values()) {
    e.disconnected(nowMs)
    e.refresh(nowMs)
    pool.touch(e)
  }
  const ids = [...client.entries.keys()]
  if (client.entries.size === 0) pool.clients.delete(key)
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
export function aggregate(
  pool: PoolState,
  resourceId: string,
): { wants: number; weight: number } | undefined {
  const r = pool.resources.get(resourceId)
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

/** A client's report of what it used of a quota in a window: the newest count of this window holds. */
function recordUsed(
  pool: PoolState,
  entry: Entry,
  used: number,
  window: number,
  nowMs: number,
): void {
  const spec = entry.resource.settings.quotaWindow
  if (spec === undefined) return
  const now = pool.quotaClock(spec, nowMs)
  if (window !== now.index) return
  if (entry.usedWindow !== now.index) {
    entry.usedWindow = now.index
    entry.used = 0
    entry.charged = 0
  }
  if (used > entry.used) entry.used = used
}
