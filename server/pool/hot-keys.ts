import { keyOfId, kindTraits, shareOfKey } from '../../shared/index.js'
import type { ResourceSettings } from '../config/index.js'
import { batchOf, putLease } from './batches.js'
import type { ClientState, Entry, ResourceState } from './entry.js'
import { promoteDue } from './ahead.js'
import { inheritedCharge, unitsOf } from './handover.js'
import { forget, subscribe, unsubscribe } from './registry.js'
import type { PoolState } from './state.js'

/**
 * A keyed family's hot keys through their life: seeded from every holder's
 * default share when a process first reports one (`seedKey`), shared among
 * those that ask (`demandOf`), dropped holder by holder once idle
 * (`idleKey`), and sent back to the default split once nobody asks
 * (`keyIsCold`, `retireKey`).
 */

/** Sends a lease of `capacity` for `entry` (lease-out.ts's `send`, handed in to keep the rooms apart). */
export type SendLease = (entry: Entry, capacity: number, nowMs: number) => void

/**
 * What a client asks of a key now, for its round: its estimated demand,
 * but none once it has not reported the key for `quietMsOf` (a client
 * reports a key only while it asks for it, so an estimate that decays
 * toward 0 would otherwise never reach it), and none below the resource's
 * epsilon.
 */
export function demandOf(e: Entry, nowMs: number): number {
  if (nowMs - e.reportedMs > quietMsOf(e.resource)) return 0
  const d = e.history.estimate()
  return d > e.resource.epsilon ? d : 0
}

/**
 * How long a holder of a key may go without reporting it before it counts as asking nothing:
 * three refresh periods, and for a rate key, as long as a holder asking at a fair part of its
 * rate (capacity ÷ holders) may go without asking it at all by chance: three of its tokens, up
 * to the burst's refill time. A holder of a slow key (100 a minute over six gateways: a part of
 * 0.28 a second) asks it at random instants, often not once in three refresh periods, though
 * it spends its part: counted as asking nothing, it was cut to 0 and given a part again when
 * it next reported, and each move cost the tokens the part held (a moved share brings no
 * burst). #41, "100 per minute" with a 6th gateway joining: keys of rank 17-23 swung between
 * holders every few seconds. (A holder seeded with a key it has not reported at all still
 * keeps it one refresh period only, shapes/hot-key.ts: where one gateway asks a key and the
 * others never do, the key goes to it as soon as before.)
 */
export function quietMsOf(r: ResourceState): number {
  const s = r.settings
  const periodsMs = 3 * s.refreshMs
  if (!kindTraits[s.kind].refills || !(s.capacity > 0)) return periodsMs
  const tokensMs = (3000 * Math.max(1, r.entries.size)) / s.capacity
  return Math.max(periodsMs, Math.min(tokensMs, (s.burst / s.capacity) * 1000))
}

/**
 * A key's entry that holds nothing and is asked for nothing, every lease of
 * it acknowledged, while others still use the key: the client enforces 0
 * for the key (it goes back to its default share only when the whole key
 * does, `retireKey`), so the entry is dropped and the client noted; it comes
 * back as a new entry when it asks for the key again.
 */
export function idleKey(e: Entry, nowMs: number): boolean {
  return (
    e.client.connected &&
    e.committed === 0 &&
    e.leases.every((l) => l.acked) &&
    demandOf(e, nowMs) === 0
  )
}

/**
 * Whether a key has gone cold: nobody asks for it, and no lease of it
 * commits anything (so nobody may enforce more than 0 of it by its own
 * lease). Never while it learns.
 */
export function keyIsCold(r: ResourceState, nowMs: number): boolean {
  if (nowMs < r.learningUntilMs) return false
  for (const e of r.entries.values())
    if (e.committedAt(nowMs) > 0 || demandOf(e, nowMs) > 0) return false
  return true
}

/**
 * A cold key goes back to the default split: its holders are told
 * (`toDefault`: the key's own lease is dropped, the default share rules it
 * again) and it leaves the pool, freeing its hot-key slot. Safe at once:
 * every holder enforces 0 of the key by its own lease (`keyIsCold`), so
 * whether it has heard yet or not, what it may enforce is 0 or its default
 * share, which the family's own resource counts.
 */
export function retireKey(pool: PoolState, r: ResourceState): void {
  const familyId = r.settings.family!.familyId
  const told = new Set<ClientState>()
  for (const e of r.entries.values()) {
    if (e.client.connected) told.add(e.client)
    unsubscribe(pool, e)
  }
  for (const key of r.idleClients) {
    const client = pool.clients.get(key)
    if (client?.connected === true) told.add(client)
  }
  for (const client of told)
    if (client.entries.has(familyId)) sendToDefault(pool, client, r.settings)
  forget(pool, r)
}

/** A lease that sends a key back to the client's default share (see `retireKey`). */
function sendToDefault(pool: PoolState, client: ClientState, s: ResourceSettings): void {
  putLease(batchOf(pool, client), {
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
 * default share again (until the key goes cold).
 */
export function seedKey(pool: PoolState, r: ResourceState, nowMs: number, send: SendLease): void {
  const family = r.settings.family!
  const holders = pool.resources.get(family.familyId)
  if (holders === undefined) return
  const { kind, capacity } = r.settings
  const key = keyOfId(family.prefix, r.settings.id)
  // Every holder is seeded before any is sent its lease: a keyed quota's lease says what the
  // key has left at the others (`elsewhere`), which counts their seeds.
  const seeded = []
  const window = pool.windowOf(holders, nowMs)
  for (const fe of holders.entries.values()) {
    // A share of this window sent ahead and due is the holder's lease of it (ahead.ts).
    promoteDue(pool, fe, nowMs)
    if (fe.leases.length === 0) continue
    const entry = subscribe(pool, fe.client, r.settings.id, r.settings)
    // A holder handed a share it may not have heard of yet (handover.ts) counts the leaver's
    // units of this key as spent once it has: what it may spend of the key is its newest
    // share less those units (never less than its share before: the leaver spent at most its
    // own), so each lease is seeded less them.
    const charge = key === undefined ? 0 : inheritedCharge(fe, key, window)
    // A share released, set aside for an heir with what its process spent of each key
    // (handover.ts, `vacancy`): its process spends no more, so its part of the key is what it
    // spent, no more. Seeded its whole part, the rest stayed stranded for the window (the keyed
    // quota model: q stopped at 9 of b's 12). What it spent is counted twice once its heir has
    // heard it was handed those units (the heir's use counts them too): not while the heir may
    // not have heard (its lease of the key is seeded less them, and nothing else counts them).
    const v = fe.vacancy
    const vacantMost =
      v === undefined || window === undefined || v.window !== window.index
        ? Infinity
        : key === undefined
          ? 0
          : unitsOf(v.keys, key)
    entry.restore(
      fe.leases.map((l) => ({
        ...l,
        seq: 0,
        acked: true,
        capacity: Math.min(
          vacantMost,
          Math.max(0, shareOfKey(kind, l.capacity, capacity) - charge),
        ),
        fallback: Math.min(
          vacantMost,
          Math.max(0, shareOfKey(kind, l.fallback, capacity) - charge),
        ),
      })),
      nowMs,
    )
    // Its share of the next window sent ahead (a keyed quota's, ahead.ts): the holder may spend
    // it of this key from that window's start, before it hears the key is hot; the key's own
    // entry counts it in that window as the family's did (and it becomes the key's lease there).
    const a = fe.ahead
    if (a !== undefined && window !== undefined && a.window > window.index) {
      entry.ahead = { ...a, capacity: shareOfKey(kind, a.capacity, capacity) }
      entry.refresh(nowMs)
    }
    entry.seededMs = Math.floor(nowMs)
    pool.touch(entry)
    seeded.push(entry)
  }
  for (const entry of seeded) send(entry, entry.newest, nowMs)
}
