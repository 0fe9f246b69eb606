import { keyIdOf, keyLimits, kindTraits } from '../../shared/index.js'
import type { Entry, ResourceState } from './entry.js'
import { send } from './lease-out.js'
import { burstRefillMs, subscribe, unsubscribe } from './registry.js'
import type { PoolState } from './state.js'

/**
 * A rate family's share handed on with what it still held. A process that
 * closes cleanly (a rolling deploy's SIGTERM) says in its release what its
 * default share still holds of every key: `level` of each key's burst, less
 * for the keys it names (their tokens). Before, the share went back to the
 * pool and its tokens with it: the process that came in its place started
 * every key nearly empty (what of the burst nobody may hold, BurstSlack,
 * is little once every share is out), and refused the first checks of keys
 * that a central limiter held full (95.5% of first checks at a gateway
 * under 5 s old, in the rolling deploy of docs/benchmarks.md).
 *
 * Now the share is set aside, still committed, as a vacancy (`HeldVacancy`)
 * for one refresh period; the others keep their shares meanwhile (the
 * vacancy is not among what silent clients hold: rounds.ts), so nothing
 * moves. A holder never sent a share (the replacement, once it asks) is
 * handed the share whole, in a lease whose capacity adds it and that carries
 * what it held (`handed`): its client adds that to each key's bucket, if its
 * family never held a share (client/keyed/family.ts). The leaver names a
 * key's tokens only from a bucket in one part with no excess: a bucket in
 * parts earns each to its own burst, and in one part at the heir its tokens
 * would earn faster (BurstSlack's property found both rules, 2026-12-02).
 * Tokens move, none are made: the leaver admits
 * nothing after its release, what the heir gets is at most what the leaver's
 * buckets held then (the coordinator caps it at the share released), and
 * what the share earned between the release and the handover, as the
 * leaver's buckets would have, idle (a fresh part of the share granted at
 * the release, empty, earning its rate to its burst: nobody else holds the
 * share meanwhile, the vacancy does). So across the processes a key's
 * tokens never exceed one bucket of it, as before. Without a holder that holds nothing within
 * the refresh period (a scale-down), the vacancy is dropped and the share
 * goes to the others as it did before, a refresh period later.
 *
 * The leaver's hot keys of the family released in the same message wait
 * beside the share (set aside with it) and go to the same heir, their
 * shares whole (`handKeys`); nobody comes, they are freed with it.
 *
 * Safe whatever is lost: a lease that carried the tokens lost or replaced,
 * the next lease of the heir carries them too until it acknowledges one
 * (`pendingHanded`); a client takes each handover once (its id); the
 * vacancy counts until the heir acknowledges (both count in between), and
 * is dropped if the heir goes away first. Nothing of it is in the ledger:
 * after a restart the set-aside share is a silent client's, to its lapse,
 * and the heir's tokens are lost, never doubled.
 */

/** A rate family's share released whole, with what it held: it may be handed on. */
export interface HeldVacancy {
  /** Of every key not named: this share of its burst. */
  readonly level: number
  /** Keys that held less, and their tokens. */
  readonly keys: readonly (readonly [string, number])[]
  /** When it was released. */
  readonly sinceMs: number
  /** Its id: a client takes a handover once, however often told (random: no client can name it). */
  readonly id: string
  /** The holder it was handed to, until that one acknowledges. */
  heir?: Entry | undefined
}

/** A heir's pending handover: sent with every lease from batch `fromSeq` on until one is acknowledged. */
export interface PendingHanded {
  readonly level: number
  readonly keys: [string, number][]
  readonly id: string
  fromSeq: number
  /**
   * A fall's gift (fall-gifts.ts), taken at `atMs`: it goes at `goesAtShare` of each key's rate
   * (the level at `levelGoesPerMs`, each named key at its `keysGoPerMs`), and each lease carries
   * what is left of it then (undefined: a release's, kept as it was held).
   */
  readonly gift?: {
    readonly atMs: number
    readonly goesAtShare: number
    readonly levelGoesPerMs: number
    readonly keysGoPerMs: readonly number[]
  }
}

/** How long a vacancy waits for a holder that holds nothing yet, in refresh periods. */
const patienceRefreshes = 1

/**
 * What a rate family's release says its share `entry` held, capped at what that share could
 * hold: a level at most the share, each key's tokens at most the share of its burst. Undefined
 * when there is nothing to hand on (not a rate family's share, or nothing held).
 */
export function heldVacancy(
  entry: Entry,
  said: { readonly level: number; readonly keys: readonly (readonly [string, number])[] },
  id: string,
  nowMs: number,
): HeldVacancy | undefined {
  const r = entry.resource
  const s = r.settings
  const family = s.family
  if (!r.shape.familyShare || s.quotaWindow !== undefined || family?.keyKind !== 'rate')
    return undefined
  const share = s.capacity > 0 ? Math.min(1, entry.committed / s.capacity) : 0
  if (!(share > 0)) return undefined
  return { ...heldWithin(family, said, share), sinceMs: nowMs, id }
}

/**
 * What a client says a rate family's share held (a release's `held`, or an ack's for a fall:
 * fall-gifts.ts), held to what `share` of it could hold: the level at most the share, each
 * key's tokens at most the share of its burst.
 */
export function heldWithin(
  family: NonNullable<Entry['resource']['settings']['family']>,
  said: { readonly level: number; readonly keys: readonly (readonly [string, number])[] },
  share: number,
): { level: number; keys: [string, number][] } {
  const defaults = { capacity: family.keyCapacity, burst: family.keyBurst }
  return {
    level: Math.min(said.level, share),
    keys: said.keys.map(([key, tokens]) => [
      key,
      Math.min(tokens, share * keyLimits(family.plan, key, defaults).burst),
    ]),
  }
}

/**
 * The held vacancies of rate family `r` go on, each whole to a holder of `sharing` that holds
 * nothing yet (a default holder: `wants` > 0, shapes/default-holders.ts; of the leaver's
 * tenant first), one per holder at a time; one not taken within the patience is dropped, and
 * one whose heir acknowledged leaves the pool.
 */
export function handOverHeld(
  pool: PoolState,
  r: ResourceState,
  sharing: readonly Entry[],
  wants: readonly number[],
  nowMs: number,
): void {
  let taken: Set<Entry> | undefined
  // Nothing allocated when there is no vacancy (every round of every family comes here); an
  // entry that leaves is deleted from the map as it is iterated, which a Map allows.
  for (const e of r.entries.values()) {
    const v = e.heldVacancy
    if (v === undefined) continue
    if (!(e.committed > r.epsilon)) {
      e.heldVacancy = undefined // lapsed: nothing to hand on
      continue
    }
    if (v.heir !== undefined) {
      if (handedTo(v.heir, v.id)) leave(pool, e, nowMs)
      // The heir went before it acknowledged: what it was sent counts on its own to its lapse.
      else if (!v.heir.client.connected) leave(pool, e, nowMs)
      continue
    }
    const heir = heirOf(r, sharing, wants, (taken ??= new Set()), e)
    if (heir === undefined) {
      if (nowMs - v.sinceMs >= patienceRefreshes * r.settings.refreshMs) leave(pool, e, nowMs)
      continue
    }
    taken.add(heir)
    v.heir = heir
    // What the share earned since the release, as the leaver's buckets would have, idle: a
    // fresh part of the share granted then, empty, earning its rate to its burst.
    const gapMs = Math.max(0, nowMs - v.sinceMs)
    const s = r.settings
    const family = s.family!
    const share = s.capacity > 0 ? Math.min(1, e.committed / s.capacity) : 0
    const defaults = { capacity: family.keyCapacity, burst: family.keyBurst }
    const refillMs = burstRefillMs(s)
    heir.handed = {
      level: Math.min(share, v.level + (refillMs > 0 ? (share * gapMs) / refillMs : 0)),
      // A key leased on its own (hot) is not the share's: what its share earned goes with the
      // key's lease (`handKeys`), none here.
      keys: v.keys.map(([k, n]): [string, number] => {
        if (pool.resources.get(keyIdOf(family.prefix, k))?.shape.hotKey === true) return [k, n]
        const { capacity, burst } = keyLimits(family.plan, k, defaults)
        return [k, Math.min(share * burst, n + (share * capacity * gapMs) / 1000)]
      }),
      id: v.id,
      fromSeq: Infinity,
    }
    send(pool, heir, heir.newest + e.committed, nowMs)
    handKeys(pool, e, heir, gapMs, nowMs)
  }
}

/**
 * The leaver's hot keys of the family, set aside with its share (clients.ts, `release`), go to
 * the same heir: each key's share moves whole to the heir's entry of the key, so the others
 * keep theirs and the heir decides the key at once. Before, the others rose to it as it was
 * released, then fell back as the heir asked, and the heir refused the key for a round trip
 * and more (1-2 s at 1 s refresh periods, the rolling deploy of docs/benchmarks.md). Safe: the
 * leaver enforces nothing since its release, and what the heir is sent is what the leaver's
 * entry still committed, which leaves the pool with it (no tokens move: the heir's part starts
 * empty, as any rise does). Until the heir reports the key it keeps the share (`seededMs`,
 * shapes/hot-key.ts).
 */
function handKeys(
  pool: PoolState,
  vacancy: Entry,
  heir: Entry,
  gapMs: number,
  nowMs: number,
): void {
  for (const ke of keysBeside(vacancy)) {
    const capacity = Math.min(ke.newest, ke.committed)
    const s = ke.resource.settings
    const to = heir.client.entries.get(s.id) ?? subscribe(pool, heir.client, s.id, s)
    ke.clear(nowMs)
    unsubscribe(pool, ke)
    if (!(capacity > 0)) continue
    to.seededMs = Math.floor(nowMs)
    // A heir that held nothing of the key: its bucket starts with what the share earned since
    // the release (a fresh part granted then), at most its burst; the client takes it only so.
    if (to.newest === 0 && kindTraits[s.kind].refills)
      to.handFill = Math.min((s.burst * capacity) / s.capacity, (capacity * gapMs) / 1000)
    send(pool, to, to.newest + capacity, nowMs)
  }
}

/** The hot keys of the vacancy's family set aside beside it. */
function keysBeside(vacancy: Entry): Entry[] {
  const familyId = vacancy.resource.settings.id
  const out: Entry[] = []
  for (const e of vacancy.client.entries.values())
    if (e.resource.shape.hotKey && e.resource.settings.family?.familyId === familyId) out.push(e)
  return out
}

/** The vacancy leaves the pool: what its share held is gone with it, and its hot keys' shares go back. */
function leave(pool: PoolState, e: Entry, nowMs: number): void {
  for (const ke of keysBeside(e)) {
    ke.clear(nowMs)
    unsubscribe(pool, ke)
  }
  e.heldVacancy = undefined
  e.clear(nowMs)
  unsubscribe(pool, e)
}

/** Whether `heir` has acknowledged a lease that carried handover `id` (or was handed another since). */
function handedTo(heir: Entry, id: string): boolean {
  const handed = heir.handed
  if (handed === undefined || handed.id !== id) return true
  if (!heir.leases.some((l) => l.acked && l.seq >= handed.fromSeq)) return false
  heir.handed = undefined
  return true
}

/**
 * What a lease of `entry` carries of a handover it has not acknowledged (undefined: none).
 * Called before each lease of a rate family's share.
 */
export function pendingHanded(
  entry: Entry,
  seq: number,
  nowMs: number,
): { level: number; keys: [string, number][]; id: string; goesAtShare?: number } | undefined {
  const handed = entry.handed
  if (handed === undefined || handedTo(entry, handed.id)) return undefined
  if (seq < handed.fromSeq) handed.fromSeq = seq
  return handedNow(handed, nowMs)
}

/**
 * What a pending handover says at `nowMs`: a release's (or a paired gift's) as it was; a gift
 * going as an excess (`gift`), what is left of it now, never what it was when taken.
 */
export function handedNow(
  handed: PendingHanded,
  nowMs: number,
): { level: number; keys: [string, number][]; id: string; goesAtShare?: number } {
  const gift = handed.gift
  if (gift === undefined) return { level: handed.level, keys: handed.keys, id: handed.id }
  const sinceMs = Math.max(0, nowMs - gift.atMs)
  // Nothing went yet at the take (a level going at once, a key of no refill: 0 × ∞ is no number).
  if (!(sinceMs > 0))
    return { level: handed.level, keys: handed.keys, id: handed.id, goesAtShare: gift.goesAtShare }
  const level = Math.max(0, handed.level - gift.levelGoesPerMs * sinceMs)
  const keys = handed.keys.map(([k, n], i): [string, number] => [
    k,
    Math.max(0, n - gift.keysGoPerMs[i]! * sinceMs),
  ])
  return { level, keys, id: handed.id, goesAtShare: gift.goesAtShare }
}

/** The holder to hand `vacancy` to: a default holder that holds nothing yet and is free. */
function heirOf(
  r: ResourceState,
  sharing: readonly Entry[],
  wants: readonly number[],
  taken: ReadonlySet<Entry>,
  vacancy: Entry,
): Entry | undefined {
  let best: Entry | undefined
  for (let i = 0; i < sharing.length; i++) {
    const e = sharing[i]!
    if (!(wants[i]! > 0) || taken.has(e)) continue
    // Never sent a share: its buckets hold nothing, each key's is one part (the client takes a
    // handover only then, client/keyed/family.ts).
    if (e.everHeld || (e.handed !== undefined && !handedTo(e, e.handed.id))) continue
    if (e.client.tenant === vacancy.client.tenant) return e
    best ??= e
  }
  return best
}
