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
  if (centrals === 0) return byTraffic(r, sharing, max)
  // The coordinator's own part (remote decisions, coordinator/central.ts) holds no default
  // share while every process holds one (it would only thin theirs); when some hold none, it
  // is placed first: it decides for every process that holds none.
  const others = sharing.filter((e) => e.client.clientId !== centralClientId)
  const central = sharing.length - others.length <= max && others.length > max
  const wants = byTraffic(r, others, central ? max - centrals : max)
  let i = 0
  return sharing.map((e) =>
    e.client.clientId === centralClientId ? (central ? 1 : 0) : wants[i++]!,
  )
}

/** The client id of the coordinator's own part of every key (one client per tenant). */
export const centralClientId = 'sluice-central'

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
