import { randomUUID } from 'node:crypto'
import {
  domainLimits,
  fastestRefillMs,
  inKindUnits,
  keyLimits,
  kindTraits,
  type LeaseGrant,
} from '../../shared/index.js'
import { leaseTtlMsAt, type FamilySettings } from '../config/index.js'
import { promoteDue } from './ahead.js'
import { batchOf, putLease } from './batches.js'
import { clockDriftShare, type Entry, type ResourceState } from './entry.js'
import { pendingInherit } from './handover.js'
import { pendingHanded } from './held-handover.js'
import { keyIsCold, retireKey } from './hot-keys.js'
import { subscribe } from './registry.js'
import type { PoolState } from './state.js'

/**
 * A lease leaves the pool: recorded on its entry as committed the moment it
 * is made (a batch lost on the way only lapses), put in its client's batch,
 * with what the client must know beside it (a family lease carries the
 * leases of the family's hot keys its holder must know of).
 */

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

/**
 * What of the burst nobody may hold a keyed family's first share may start with: all of it. A
 * process that joins later starts from what the falls made for it gave up (fall-gifts.ts):
 * the second gets the half the first gave, the third a sixth from each of the two. From
 * 2026-11-28 to 2026-12-02 a first share took half, leaving the rest to whoever joined next
 * (a half, a quarter, an eighth: 86 of a burst of 100 went out to three gateways, unevenly;
 * docs/keys.md, "A family's first share starts full").
 */
export const firstShareFill = 1

/** Sends `entry` a lease of `capacity` now (and, for a family's own resource, its hot keys'). */
export function send(
  pool: PoolState,
  entry: Entry,
  capacity: number,
  nowMs: number,
  reportNow = false,
): void {
  const r = entry.resource
  if (!r.shape.familyShare) return sendOne(pool, entry, capacity, nowMs, reportNow)
  // A keyed quota's holder starts anew each window: its first family lease of a window is a first.
  const window = pool.windowOf(r, nowMs)
  // Its share of the window sent ahead and in force (ahead.ts) was never sent as a lease of the
  // window: the first sent is the first (it carries the hot keys' leases of the window).
  const first =
    window === undefined
      ? entry.leases.length === 0
      : entry.leaseWindow !== window.index ||
        (entry.promoted !== undefined && entry.leases.at(-1) === entry.promoted)
  // On a new connection the holder may know none of its key leases (a batch that carried them
  // was lost with the old one, or a restored pool took them for acknowledged): they go again.
  const again = entry.resendDue
  sendOne(pool, entry, capacity, nowMs)
  withFamilyLease(pool, entry, first, again, window?.index, nowMs)
}

/**
 * A family lease goes out: the holder may extend its default share of every
 * key with it, so the same batch carries what it must know of the hot keys.
 * A new holder gets a lease of 0 for each (it never enforces a default for
 * them); a known one, again, each key lease whose batch did not go (`unsent`:
 * its write failed or came too late; no later batch of the client made before
 * that went either, coordinator/write-ahead.ts) or went on a connection since
 * lost (`reconnected`). A key lease merely not acknowledged yet is on its way,
 * ahead of this batch on the same connection: sent again with every family
 * lease, as it was until 2026-12-06, each resend made the key's record longer
 * while the acks waited for slow writes, and the writes slower (after a
 * coordinator restart, a crowded family's writes grew to 170-290 MB in 15 s
 * in 1 run of 5 to 10, and the hot keys fell to a fifth of their due).
 * A keyed quota's holder is new in each window (`windowIndex`): a key
 * leased to it in an earlier window gets a lease of 0 for this one, or it
 * would take its new default share of a key leased on its own. A family
 * lease renewed on a new connection (`again`), or the first of a holder or
 * of a window (`first`), carries every hot key's lease the holder has, or
 * one of 0: the client may have none of them (found by the keyed quota
 * model, 13 of 12 both times: after a restart, a holder whose first batch
 * was lost took its default share of a hot key the pool counted at 1 for
 * it; and a holder whose family lease a restored pool had forgotten, while
 * it restored the holder's key lease of 0 as acknowledged, took its default
 * share of that key with its first family lease).
 */
function withFamilyLease(
  pool: PoolState,
  entry: Entry,
  first: boolean,
  again: boolean,
  windowIndex: number | undefined,
  nowMs: number,
): void {
  const keys = pool.familyKeys.get(entry.resource.settings.id)
  if (keys === undefined) return
  const seq = pool.batches.get(entry.client)?.seq
  for (const r of keys) {
    const e = entry.client.entries.get(r.settings.id)
    // A keyed quota's key nobody asks for is not carried into a new window: it goes back to
    // the default split now (its leases of the window before have run out).
    if (windowIndex !== undefined && e?.leaseWindow !== windowIndex && keyIsCold(r, nowMs)) {
      retireKey(pool, r)
      continue
    }
    if (e === undefined) {
      if (first || again)
        sendOne(pool, subscribe(pool, entry.client, r.settings.id, r.settings), 0, nowMs)
    } else if (windowIndex !== undefined && e.leaseWindow !== windowIndex) {
      // Its block of this window sent ahead (ahead.ts) is its lease of it now, and goes again
      // as such, not a lease of 0: the key's own round may come much later (a keyed quota over
      // 30 gateways: ~730 hot keys, their round at the edge sliced over a second, and the
      // coordinator's part refused each key it held whole from the 0 until then).
      if (e.ahead?.window === windowIndex && promoteDue(pool, e, nowMs))
        sendOne(pool, e, e.newest, nowMs)
      else sendOne(pool, e, 0, nowMs)
    } else if (
      e.resendDue ||
      e.leases.length === 0 ||
      ((first || again) && e.leases.at(-1)?.seq !== seq)
    )
      sendOne(pool, e, e.newest, nowMs)
  }
}

/**
 * A joiner's first share of a rate family takes what the falls made for it gave up
 * (fall-gifts.ts), handed as a share released whole is (`handed`, held-handover.ts: its client
 * takes it once, into buckets that never held anything, and each lease carries it until one is
 * acknowledged): when its rise is the one the falls were made for (`paired`), as tokens of the
 * share; else as an excess going as the falls' would have (`goesAtShare`).
 */
function takeGifts(r: ResourceState, entry: Entry, share: number, nowMs: number): void {
  const family = r.settings.family
  if (family === undefined || r.burstSlack === undefined || r.burstSlack.gifts.size === 0) return
  const defaults = { capacity: family.keyCapacity, burst: family.keyBurst }
  const limitsOf = (key: string): { capacity: number; burst: number } =>
    keyLimits(family.plan, key, defaults)
  const taken = r.burstSlack.gifts.take(share, limitsOf, domainLimits.maxSpentKeys, nowMs)
  if (taken === undefined) return
  // Paired (fall-gifts.ts): its rise is the one the falls were made for, and the tokens move
  // with the rate, as a share released whole does (the client raises its buckets' level).
  if (taken.paired) {
    entry.giftLevel = 0
    entry.handed = { level: taken.level, keys: taken.keys, id: randomUUID(), fromSeq: Infinity }
    return
  }
  entry.giftLevel = taken.level
  // Sent again (a lease lost), it is what is left of it then: each key on its own line.
  const levelRefillMs = fastestRefillMs(defaults, family.plan)
  entry.handed = {
    level: taken.level,
    keys: taken.keys,
    id: randomUUID(),
    fromSeq: Infinity,
    gift: {
      atMs: nowMs,
      goesAtShare: taken.goesAtShare,
      levelGoesPerMs: levelRefillMs > 0 ? taken.goesAtShare / levelRefillMs : Infinity,
      keysGoPerMs: taken.keys.map(([k]) => (taken.goesAtShare * limitsOf(k).capacity) / 1000),
    },
  }
}

/**
 * Whether no lease of `entry` lets its client hold anything (none sent, or every one 0): its
 * buckets hold nothing of the share, whatever fell to 0 before counted as a fall.
 */
function holdsNothing(entry: Entry): boolean {
  for (const l of entry.leases) if (l.capacity > 0 || l.fallback > 0) return false
  return true
}

/** Records a lease of `capacity` for `entry` and puts it in its client's batch. */
export function sendOne(
  pool: PoolState,
  entry: Entry,
  capacity: number,
  nowMs: number,
  /** A key's seed asking its holder to say at once whether it asks for the key (clients.ts). */
  reportNow = false,
): void {
  const batch = batchOf(pool, entry.client)
  const r = entry.resource
  const s = r.settings
  // A quota's block is spent until the window ends (less the grace, so no unit spills into
  // the next window): that is its life, and it is counted until the window ends.
  const window = pool.windowOf(r, nowMs)
  // A block of this window sent ahead is the lease this one follows (ahead.ts).
  if (window !== undefined) promoteDue(pool, entry, nowMs)
  const ttlMs =
    window === undefined
      ? leaseTtlMsAt(s, nowMs)
      : Math.max(0, Math.floor(window.endMs - nowMs - s.graceMs))
  // Before this lease is recorded (which marks it held): may its bucket start full? A first
  // lease may, with what of the burst nobody may hold. A rate key reset (reset.ts) fills its
  // holders' buckets once, whatever came before. A keyed family's first share starts with what
  // nobody may hold (`fill`, or `full` when that is all of its share) and what the falls made
  // for it gave up (`handed`).
  let full = window === undefined && entry.refillDue
  let fill = 0
  if (!full && window === undefined && capacity > 0) {
    const share = capacity / s.capacity
    if (!r.shape.familyShare) {
      if (entry.leases.length === 0) full = r.burstSlack?.take(share, nowMs) === true
      else if (capacity > entry.newest) {
        // A named rate's rise granted as an ack is handled holds what the falls it acknowledged
        // gave up (clients.ts `noteGiven`), a hot key's rise what its falls gave up since and no
        // rise took (entry.ts, `giftTokens`): up to the burst it gains out of what was free
        // (`fill`, tokens).
        const handed = r.shape.hotKey ? r.giftTokens : (pool.handBack.get(s.id) ?? 0)
        const gains = capacity - Math.max(entry.newest, entry.committed)
        if (handed > 0 && gains > 0) {
          const tokens = Math.min(handed, (gains / s.capacity) * s.burst)
          if (r.shape.hotKey) r.giftTokens = handed - tokens
          else pool.handBack.set(s.id, handed - tokens)
          fill = tokens / s.capacity
        }
      }
    } else if (r.burstSlack !== undefined && holdsNothing(entry)) {
      // A share's first lease is often 0 (what it is to get is freed as the others acknowledge
      // their falls): its first of more than 0 is its first share. It starts with what of the
      // burst nobody may hold, and what the falls made for it gave up (fall-gifts.ts).
      fill = r.burstSlack.takePart(share, firstShareFill, nowMs)
      full = fill >= share - 1e-9
      if (!full && entry.handed === undefined && !entry.everHeld) takeGifts(r, entry, share, nowMs)
    }
  }
  entry.refillDue = false
  // A fall a joiner waits for (shapes/family-share.ts): its holder gives up what fell, for it.
  const handOn =
    (r.handOnFalls || (r.handOnToZero && capacity <= r.epsilon && seededUnasked(entry))) &&
    capacity < entry.newest - r.epsilon
  // A hot key's share handed on (held-handover.ts): what it earned since the leaver's release.
  // The heir held nothing of the key, so this rise is the leaver's share alone: its tokens are
  // the fresh part's (`fillWhole`), not a gift going at the rate gained.
  let fillWhole = false
  if (!full && fill === 0 && entry.handFill > 0 && capacity > 0 && r.shape.hotKey) {
    fill = Math.min(entry.handFill, (s.burst * capacity) / s.capacity) / s.capacity
    fillWhole = true
  }
  entry.handFill = 0
  // A lease of 0 to a holder the pool means to hold more (its rise waits for capacity the
  // others' falls free as they are acknowledged, a round trip away): it says so, and the client
  // waits for that rise (its `ready()`, and a check its share cannot decide) rather than take 0
  // for its share (#41: a gateway joining a round after the others resolved `ready()` on a
  // family lease of 0, and its first checks went to the coordinator's part, which holds
  // nothing of a family that is not crowded: refused). A named rate or concurrency resource the
  // same (#41: of three gateways starting together, the two that joined while the first held the
  // whole refused their first checks: 76.7-86.7% of the first checks a central limiter admits);
  // there the pool means more for a holder that reported nothing only by the surplus it spreads
  // (`surplus: spread`, the default), so a joiner is starved, and rising, only then. Not a
  // quota's: its block frees as its holder reports, not within a round trip.
  // A rate key's own lease, of any capacity, below what the pool means its holder to hold, the
  // rest waiting for falls on their way (a round trip; not for a holder's seeded lease kept until
  // it reports, `seedsHeld`), or its seed to the holder whose report made it hot with checks
  // waiting (`riseAsked`: the key's first round is to come, shapes/hot-key.ts): it says so too,
  // and a check its holder's part cannot decide waits for the next lease of the key (#41: a
  // customer's 105 requests at once at one gateway of three: its third admitted, the rest
  // refused while the other two thirds moved to it).
  const rising =
    window === undefined &&
    ((capacity <= 0 && (r.shape.familyShare || s.family === undefined) && r.starved.has(entry)) ||
      (r.shape.hotKey &&
        kindTraits[s.kind].refills &&
        (entry.riseAsked || (entry.target > capacity + r.epsilon && !r.seedsHeld))))
  entry.saidRising = rising
  if (capacity > 0) entry.everHeld = true
  // The fallback never exceeds the lease: what a silent client may enforce is what it was leased.
  const safeShare = s.safeCapacity ?? s.capacity / Math.max(1, r.entries.size)
  const safeCapacity = Math.min(capacity, inKindUnits(s.kind, safeShare))
  entry.record(batch.seq, capacity, safeCapacity, ttlMs, nowMs, pool.sendDelayMs)
  if (window !== undefined) entry.leaseWindow = window.index
  pool.touch(entry)
  const share = s.capacity > 0 ? capacity / s.capacity : 0
  const traits = kindTraits[s.kind]
  const inherit =
    window !== undefined && r.shape.familyShare
      ? pendingInherit(entry, window.index, batch.seq)
      : undefined
  const handed =
    window === undefined && r.shape.familyShare ? pendingHanded(entry, batch.seq, nowMs) : undefined
  batch.madeMs ??= nowMs
  putLease(batch, {
    ...(handOn ? { handOn: true as const } : {}),
    ...(rising ? { rising: true as const } : {}),
    ...(reportNow ? { reportNow: true as const } : {}),
    ...(inherit === undefined ? {} : { inherit }),
    ...(handed === undefined ? {} : { handed }),
    resource: s.id,
    kind: s.kind,
    capacity,
    burst: traits.refills ? s.burst * share : capacity,
    ttlMs,
    refreshMs: s.refreshMs,
    safeCapacity,
    safeHoldMs: s.safeHoldMs,
    ...(full
      ? { full: true as const }
      : fill > 0
        ? { fill: fill * s.capacity, ...(fillWhole ? { fillWhole: true as const } : {}) }
        : {}),
    ...(r.shape.familyShare ? { family: familyPayload(s.family!) } : {}),
    ...(window === undefined
      ? r.shape.familyShare
        ? {}
        : { limit: { capacity: s.capacity, burst: traits.refills ? s.burst : s.capacity } }
      : {
          window: {
            index: window.index,
            endsInMs: ttlMs,
            quota: s.capacity,
            lengthMs: Math.round(window.endMs - window.startMs),
            ...(r.shape.hotKey
              ? { elsewhere: (entry.sentElsewhere = elsewhere(r, entry, window.index, nowMs)) }
              : {}),
            ...windowEdge(entry.client.edgeReport, window.endMs, nowMs),
            ...nextPart(entry, window.index, s.graceMs, nowMs),
          },
        }),
  })
}

/**
 * How much sooner the window's end may come than it is placed now: the windows' clock may start
 * slewing at any moment (1%, quota-clock.ts), on top of the clocks' drift. Only time still to
 * come is exposed to it: the time since the report is past, measured by both monotonic clocks.
 */
const windowSlewShare = 0.01 + clockDriftShare

/**
 * A quota lease's window end measured from one of the client's numbered reports (the newest,
 * or of the recent ones the one that came soonest: `ClientState.edgeReport`) (`edge`: the
 * client places it on its own clock by when it sent the report, so no one-way delay can carry
 * its spending past the window's end), shortened for drift: the time since the report by the
 * clocks' drift, the time still to come by that and the windows' slew, and 1 ms. Nothing for a
 * client that does not number its reports: it spends until `endsInMs` after the lease came,
 * `windowGraceMs` early. Measured: the share of a keyed quota nobody spends refused at the edges
 * (docs/benchmarks.md).
 */
export function windowEdge(
  last: { readonly n: number; readonly atMs: number } | undefined,
  endMs: number,
  nowMs: number,
): { edge?: [number, number] } {
  if (last === undefined) return {}
  const pastMs = Math.max(0, Math.min(nowMs, endMs) - last.atMs)
  const toComeMs = Math.max(0, endMs - Math.max(nowMs, last.atMs))
  const ms = Math.floor(pastMs * (1 - clockDriftShare) + toComeMs * (1 - windowSlewShare)) - 1
  return ms > 0 ? { edge: [last.n, ms] } : {}
}

/**
 * A quota's part of the next window sent ahead (ahead.ts), on every lease of the window
 * before it: spent from `startsInMs` after the lease comes, the time until the window opens
 * stretched by the windows' slew and the clocks' drift and a ms more (the lease comes after it
 * was made, so never before the window opens), until its end as `windowEdge` places it.
 */
export function nextPart(
  entry: Entry,
  windowIndex: number,
  graceMs: number,
  nowMs: number,
): { next?: NonNullable<NonNullable<LeaseGrant['window']>['next']> } {
  const a = entry.ahead
  if (a === undefined || a.window !== windowIndex + 1) return {}
  const { edge } = windowEdge(entry.client.edgeReport, a.endMs, nowMs)
  return {
    next: {
      index: a.window,
      capacity: a.capacity,
      startsInMs: Math.ceil(Math.max(0, a.startMs - nowMs) / (1 - windowSlewShare)) + 1,
      endsInMs: Math.max(0, Math.floor(a.endMs - nowMs - graceMs)),
      ...(edge === undefined ? {} : { edge }),
    },
  }
}

/**
 * What a keyed quota's key may still admit outside `entry`'s process: what the key has left
 * of the window's budget (its capacity and what a reset gave back, less what every holder
 * spent) less what this process may still spend of it. What a holder spent is what it
 * reported, or, while it has not reported the key since it was seeded from its default share
 * (hot-keys.ts), that whole seed: what it spent of its share is not known yet, and the figure
 * must not say more is left than is (clients add it to their part for the cluster's
 * remaining: client/keyed/family.ts). An estimate for a refusal's Retry-After and for that
 * remaining, never for admitting. Σ spent is summed once per instant (a round leases every
 * holder of the key at once).
 */
export function elsewhere(
  r: ResourceState,
  entry: Entry,
  windowIndex: number,
  nowMs: number,
): number {
  let memo = usedSums.get(r)
  if (memo === undefined || memo.atMs !== nowMs || memo.window !== windowIndex) {
    let sum = 0
    for (const e of r.entries.values()) sum += spentOf(e, windowIndex)
    usedSums.set(r, (memo = { atMs: nowMs, window: windowIndex, sum }))
  }
  const own = spentOf(entry, windowIndex)
  const left = r.settings.capacity + r.resetUnits(windowIndex) - memo.sum
  return Math.max(0, Math.floor(left - Math.max(0, entry.newest - own)))
}

/**
 * A hot key's holder seeded with its default share as the key went hot that has not asked for
 * it since: it has not reported the key since, or its first report said it never asked for it
 * (`unasked`, client/keyed/family.ts), and none since asked for it. Not a holder that asked for
 * it before and reported since, asking for nothing: it may ask again, and spend its excess
 * where it is.
 */
function seededUnasked(e: Entry): boolean {
  return e.reportedMs < e.seededMs || (e.seedUnasked && !e.hasChecked)
}

/** What a holder of a quota key spent of window `windowIndex`, as far as the pool knows (`elsewhere`). */
function spentOf(e: Entry, windowIndex: number): number {
  const used = e.usedWindow === windowIndex ? e.used : 0
  return e.reportedMs < e.seededMs ? Math.max(used, e.newest) : used
}

/** Σ used of a quota key at an instant (`elsewhere`); weak, so a forgotten key takes its memo. */
const usedSums = new WeakMap<ResourceState, { atMs: number; window: number; sum: number }>()
