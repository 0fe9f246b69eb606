import { crowdedShare } from '../../../shared/index.js'
import type { Entry, ResourceState } from '../entry.js'

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
export function defaultHolders(r: ResourceState, sharing: readonly Entry[]): number[] {
  const max = r.settings.family!.maxDefaultHolders
  let centrals = 0
  for (const e of sharing) if (e.client.clientId === centralClientId) centrals++
  // Whether the family is crowded goes by every process connected to it, not by those sharing
  // this round: one that left a fall unacknowledged for a refresh period sits the round out
  // (rounds.ts), but is still there. Counted by the round alone, a crowded family whose acks
  // came late (a restarted coordinator under 8 deciding processes) flipped to not crowded and
  // back at every round, each flip moving every key's share: thousands of leases a second, the
  // writes and acks further behind, the hot keys at 20-70% of their due to the run's end (#41).
  const present = connectedOf(r)
  if (present.centrals === 0) {
    r.crowded = false
    for (const e of sharing) e.decidedCentrally = false
    if (!withheldAtStart(r, sharing)) return byTraffic(r, sharing, max)
    // A keyed quota's share is never taken back within its window (a day, for a daily quota),
    // and with this many processes the family is crowded as soon as one asks the coordinator
    // (the coordinator's part then comes): until then a process that has checked nothing yet,
    // or asks the coordinator, holds nothing, as in a crowded family. Given at once by traffic
    // (all 0, so by key), the first window's default went to the first of 30 gateways starting
    // together, which then asked the coordinator for every check, and stayed there to the
    // window's end while the coordinator's part, which decided for them, held none (79–90% of
    // the central limiter in the first 10 s of a keyed quota over 30 gateways, the whole run
    // 95–97%: docs/benchmarks.md).
    const local = (e: Entry): boolean => e.hasChecked && !e.decidesRemotely
    const wants = byTraffic(r, sharing.filter(local), max)
    let i = 0
    return sharing.map((e) => (local(e) ? wants[i++]! : 0))
  }
  // The coordinator's own part (remote decisions, coordinator/central.ts) holds no default
  // share while every process holds one (it would only thin theirs). A crowded family (a share
  // below crowdedShare: a key's burst split too thin to decide on) is decided centrally for each
  // process that asks the coordinator (`decide`): such a process holds no default share, and the
  // coordinator's part holds it instead, the whole of every key where every process asks, so a
  // key asked thinly everywhere is decided as one central limiter would (#41). When processes
  // are past `maxDefaultHolders`, it is placed first too: it decides for every one that holds none.
  const others = present.others
  // Crowded past five processes, and still with five once it was (hysteresis): a rolling deploy
  // of six gateways closes one before its replacement comes, and every switch costs the burst
  // of what moves (a moved share brings none).
  const crowded = others * crowdedShare > 1 || (r.crowded && (others + 1) * crowdedShare > 1)
  r.crowded = crowded
  // Crowded, a process that has checked nothing of the family yet (it just joined: a deploy, a
  // scale-up) holds nothing either until its reports say how it checks: one that asks the
  // coordinator would hold a default share only to give it back a round later, and every such
  // move costs the burst of what moves (#41: 30 gateways starting together). One that checks
  // with `tryAcquire` alone gets its place by traffic once it has any.
  const decidedCentrally = (e: Entry): boolean =>
    crowded && e.client.clientId !== centralClientId && (e.decidesRemotely || !e.hasChecked)
  const local = sharing.filter((e) => e.client.clientId !== centralClientId && !decidedCentrally(e))
  const central =
    centrals <= max && (local.length < sharing.length - centrals || local.length > max)
  const wants = byTraffic(r, local, central ? max - centrals : max)
  // Said on each entry, for the family's hot keys (hot-key.ts): none of a key for them either.
  for (const e of sharing) e.decidedCentrally = decidedCentrally(e)
  let i = 0
  return sharing.map((e) =>
    e.client.clientId === centralClientId
      ? central
        ? 1
        : 0
      : e.decidedCentrally
        ? 0
        : wants[i++]!,
  )
}

/**
 * The weight each of `sharing` has in the default split: its own, but the coordinator's part's
 * is that of every process it decides for (those decided centrally: their part is its part), at
 * least its own. Call after defaultHolders (it marks those).
 */
export function defaultWeights(sharing: readonly Entry[]): number[] {
  let standsFor = 0
  for (const e of sharing) if (e.decidedCentrally) standsFor += e.weight
  return sharing.map((e) =>
    e.client.clientId === centralClientId ? Math.max(e.weight, standsFor) : e.weight,
  )
}

/** The coordinator's parts and the other clients connected to the family `r`, sharing or not. */
function connectedOf(r: ResourceState): { centrals: number; others: number } {
  let centrals = 0
  let others = 0
  for (const e of r.entries.values()) {
    if (!e.client.connected) continue
    if (e.client.clientId === centralClientId) centrals++
    else others++
  }
  return { centrals, others }
}

/** The client id of the coordinator's own part of every key (one client per tenant). */
export const centralClientId = 'sluice-central'

/**
 * Whether the coordinator's own part decides for `e`'s process in the family `familyId` (a
 * crowded family's last round said so): such a process holds none of the family's hot keys
 * (shapes/hot-key.ts, named-quota.ts `quotaBlocks`).
 */
export function decidedCentrally(e: Entry, familyId: string): boolean {
  return e.client.entries.get(familyId)?.decidedCentrally === true
}

/**
 * Whether a keyed quota's default split, with no coordinator's part in it yet, is withheld from
 * the processes that have not checked locally (defaultHolders): with more processes than a
 * crowded family has, while none has checked yet (how they check is not known), or once one
 * asks the coordinator (its part is coming). Once processes check and none asks remotely, the
 * split goes by traffic to all as before, a joiner (a deploy) included: withheld from a joiner
 * until its first report, its first checks would be refused meanwhile.
 */
// It counts the round's sharers, not every connected process as the crowd does (above): a
// keyed quota's share is never taken back within its window, so within one no process leaves a
// fall unacknowledged and sits a round out (a pool test of six processes, one turning to the
// coordinator and deaf to its leases, kept its share and stayed in every round; 2026-12-07). A
// window's edge, where the next window's share may be lower, was not tried.
function withheldAtStart(r: ResourceState, sharing: readonly Entry[]): boolean {
  if (r.settings.family!.keyKind !== 'quota' || !(sharing.length * crowdedShare > 1)) return false
  let checked = false
  for (const e of sharing) {
    if (e.decidesRemotely) return true
    if (e.hasChecked) checked = true
  }
  return !checked
}

/** The `max` of `sharing` that use the family most, by tenant first: 1 each, the others 0. */
function byTraffic(r: ResourceState, sharing: readonly Entry[], max: number): number[] {
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
