import { fastestRefillMs, kindTraits, slowestRefillMs } from '../../shared/index.js'
import { isFamilyKey, type ResourceSettings } from '../config/index.js'
import { BurstSlack } from './burst-slack.js'
import { forgetReserved } from './central-spend.js'
import { ClientState, Entry, ResourceState } from './entry.js'
import { hotSlotKey, type PoolState } from './state.js'

/**
 * The registry: which client uses which resource. An entry joins a client
 * to a resource (`subscribe`), leaves (`unsubscribe`), or is set aside under
 * a key of its own to count until it lapses (`setAside`); a resource with no
 * entries leaves the pool (`forget`). The tallies kept beside (a family's hot
 * keys, each tenant's resources and hot-key slots) follow here, and only here.
 */

/**
 * How long a resource's burst takes to refill at its capacity, ms. Infinity where no bucket
 * may start full: a kind that does not refill (slots, a quota's budget), and a family's hot
 * keys (a key's own lease carries what its bucket held). A keyed family's own resource: its
 * slowest key's (the plan's included), so a first share may start every key full.
 */
export function burstRefillMs(s: ResourceSettings): number {
  const f = s.family
  if (f !== undefined) {
    if (f.role !== 'family' || s.quotaWindow !== undefined || !kindTraits[f.keyKind].refills)
      return Infinity
    return slowestRefillMs({ capacity: f.keyCapacity, burst: f.keyBurst }, f.plan)
  }
  if (s.quotaWindow !== undefined) return Infinity
  if (!kindTraits[s.kind].refills || !(s.capacity > 0)) return Infinity
  return (s.burst / s.capacity) * 1000
}

/**
 * What of a rate resource's burst a lease may start full with (burst-slack.ts): none for a kind
 * that does not refill or a family's hot key (burstRefillMs). Until the pool knows every lease
 * that may be enforced (its leases of a forgotten state of the resource, a restart's learning),
 * anything may be held.
 */
export function burstSlackOf(pool: PoolState, r: ResourceState): BurstSlack | undefined {
  const refillMs = burstRefillMs(r.settings)
  if (!(refillMs < Infinity) || !(refillMs > 0)) return undefined
  const unknownUntilMs =
    r.learningUntilMs > pool.startMs ? Math.max(r.heldUntilMs, r.learningUntilMs) : r.heldUntilMs
  return new BurstSlack(refillMs, unknownUntilMs, giftRefillMs(r.settings))
}

/** What a fall's gift goes at least at the pace of (fall-gifts.ts): a family's fastest key's refill. */
function giftRefillMs(s: ResourceSettings): number {
  const f = s.family
  if (f === undefined) return burstRefillMs(s)
  return fastestRefillMs({ capacity: f.keyCapacity, burst: f.keyBurst }, f.plan)
}

/** After a change of capacity or burst: nothing free until every lease of the old ones may have ended. */
export function unsettledSlack(r: ResourceState): BurstSlack | undefined {
  const refillMs = burstRefillMs(r.settings)
  if (!(refillMs < Infinity) || !(refillMs > 0)) return undefined
  return new BurstSlack(
    refillMs,
    Math.max(r.heldUntilMs, r.seenMs, r.learningUntilMs),
    giftRefillMs(r.settings),
  )
}

/** The entry of `client` for `resourceId`, made (with its resource, if new) when there is none. */
export function subscribe(
  pool: PoolState,
  client: ClientState,
  resourceId: string,
  settings: ResourceSettings,
): Entry {
  let entry = client.entries.get(resourceId)
  if (entry !== undefined) return entry
  const isKey = isFamilyKey(settings)
  let r = pool.resources.get(resourceId)
  if (r === undefined) {
    // Learning runs for learningMs after the coordinator starts, whenever the resource first appears.
    r = new ResourceState(
      settings,
      pool.shapeOf(settings),
      pool.startMs + (pool.learn ? settings.learningMs : 0),
      Math.max(pool.quietSinceMs, pool.quietAfter.get(resourceId)?.heldUntilMs ?? -Infinity),
    )
    // What of its burst nobody may hold goes on from where its forgotten state left it.
    const kept = pool.quietAfter.get(resourceId)
    pool.quietAfter.delete(resourceId)
    r.burstSlack =
      kept?.slack !== undefined && kept.refillMs === burstRefillMs(settings)
        ? kept.slack
        : burstSlackOf(pool, r)
    pool.resources.set(resourceId, r)
    const family = settings.family
    if (isKey && family !== undefined) {
      let keys = pool.familyKeys.get(family.familyId)
      if (keys === undefined) pool.familyKeys.set(family.familyId, (keys = new Set()))
      keys.add(r)
      // Its hot-key slot is the tenant's whose client made it hot.
      if (client.tenant !== undefined) {
        r.hotFor = client.tenant
        const slot = hotSlotKey(family.familyId, client.tenant)
        pool.hotKeysByTenant.set(slot, (pool.hotKeysByTenant.get(slot) ?? 0) + 1)
      }
    }
  } else if (isKey) r.unnoteIdle(client.key)
  entry = new Entry(client, r)
  if (isKey) client.keyEntries++
  client.entries.set(resourceId, entry)
  r.entries.set(client.key, entry)
  if (client.tenant !== undefined) {
    let used = pool.tenantResources.get(client.tenant)
    if (used === undefined)
      pool.tenantResources.set(client.tenant, (used = new Map<string, number>()))
    used.set(resourceId, (used.get(resourceId) ?? 0) + 1)
  }
  return entry
}

/** The entry leaves: nothing of it counts any more (the caller has made sure nothing does). */
export function unsubscribe(pool: PoolState, entry: Entry): void {
  const { client, resource } = entry
  resource.unclaim(entry)
  if (resource.shape.hotKey) client.keyEntries--
  const used = client.tenant === undefined ? undefined : pool.tenantResources.get(client.tenant)
  if (used !== undefined) {
    const n = (used.get(resource.settings.id) ?? 1) - 1
    if (n > 0) used.set(resource.settings.id, n)
    else used.delete(resource.settings.id)
    if (used.size === 0) pool.tenantResources.delete(client.tenant!)
  }
  pool.dirty.delete(entry)
  // One never written has no record to remove (ledger-projection.ts, `unrecorded`).
  if (entry.ledgered) pool.gone({ clientKey: client.key, resource: resource.settings.id })
  forgetReserved(pool, entry)
  client.entries.delete(resource.settings.id)
  resource.entries.delete(client.key)
  resource.unstarve(entry)
  resource.committedSum -= entry.committed
  if (client.entries.size === 0 && !client.connected) pool.clients.delete(client.key)
}

/**
 * Moves `entries` of a client (all that a replaced process holds, or a
 * quota it released) under a key of their own, disconnected: they count
 * until they lapse, and nothing the client does next frees them.
 */
export function setAside(
  pool: PoolState,
  client: ClientState,
  entries: readonly Entry[],
  nowMs: number,
): Entry[] {
  if (entries.length === 0) return []
  const out: Entry[] = []
  // A key no client has, restored ones included (a ledger may hold set-aside clients too).
  let asideKey: string
  do asideKey = `${client.key}\u0001${++pool.replaced}`
  while (pool.clients.has(asideKey))
  const aside = new ClientState(asideKey, client.clientId, client.tenant)
  aside.connected = false
  pool.clients.set(aside.key, aside)
  for (const entry of entries) {
    const r = entry.resource
    pool.dirty.delete(entry)
    if (entry.ledgered) pool.gone({ clientKey: client.key, resource: r.settings.id })
    forgetReserved(pool, entry)
    const moved = new Entry(aside, r)
    moved.leases = entry.leases
    moved.weight = entry.weight
    moved.priority = entry.priority
    moved.used = entry.used
    moved.usedWindow = entry.usedWindow
    moved.charged = entry.charged
    moved.leaseWindow = entry.leaseWindow
    moved.ahead = entry.ahead
    if (client.entries.get(r.settings.id) === entry) client.entries.delete(r.settings.id)
    if (r.shape.hotKey) {
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
    pool.touch(moved)
    out.push(moved)
  }
  return out
}

/** A resource with no entries left leaves the pool (and its family's hot keys). */
export function forget(pool: PoolState, r: ResourceState, nowMs = r.seenMs): void {
  pool.resources.delete(r.settings.id)
  // Until the resource is quiet, a new state of it must know when its last lease may end.
  const refillMs = burstRefillMs(r.settings)
  if (refillMs < Infinity && r.heldUntilMs > -Infinity)
    pool.quietAfter.set(r.settings.id, {
      heldUntilMs: r.heldUntilMs,
      refillMs,
      slack: r.burstSlack,
    })
  const family = r.settings.family
  if (!r.shape.hotKey || family === undefined) return
  // What the key's holders may still spend of it was spent on a default share's keys too: the
  // family is not quiet (a first share that starts full) until its hot keys are, forgotten or not.
  if (r.heldUntilMs > -Infinity)
    familyHeld(pool, family.familyId, r.heldUntilMs, Math.max(nowMs, r.seenMs))
  const keys = pool.familyKeys.get(family.familyId)
  if (keys?.delete(r) === true && r.hotFor !== undefined) {
    const slot = hotSlotKey(family.familyId, r.hotFor)
    const n = (pool.hotKeysByTenant.get(slot) ?? 1) - 1
    if (n > 0) pool.hotKeysByTenant.set(slot, n)
    else pool.hotKeysByTenant.delete(slot)
  }
  if (keys?.size === 0) pool.familyKeys.delete(family.familyId)
}

/** Notes that a key of family `familyId` may be enforced until `untilMs`, its resource forgotten or not. */
function familyHeld(pool: PoolState, familyId: string, untilMs: number, nowMs: number): void {
  const family = pool.resources.get(familyId)
  if (family !== undefined) {
    // The key's own buckets were outside what the family's default shares hold: from now, for
    // all the family's bound knows, any of every key's burst may be held until they end.
    family.burstSlack?.disturb(Math.max(untilMs, nowMs), nowMs)
    return family.held(untilMs)
  }
  const kept = pool.quietAfter.get(familyId)
  const settings = pool.settingsFor(familyId)
  const ms = kept?.refillMs ?? (settings === undefined ? Infinity : burstRefillMs(settings))
  if (!(ms < Infinity)) return
  kept?.slack?.disturb(Math.max(untilMs, nowMs), nowMs)
  const before = kept?.heldUntilMs ?? -Infinity
  pool.quietAfter.set(familyId, {
    heldUntilMs: Math.max(before, untilMs),
    refillMs: ms,
    slack: kept?.slack,
  })
}
