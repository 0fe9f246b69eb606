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
