import type { ResourceSettings, ResourceTemplate } from '../config/index.js'
import type { ResourceFigures } from './view.js'

/**
 * The resources in use, then each named resource of the config no client
 * uses yet, idle: a dashboard and its alerts see the series from the start,
 * not from the first client. Templates with a `*` and keyed families name no
 * single resource and are left out.
 */
export function withIdleResources(
  inUse: ResourceFigures[],
  templates: readonly ResourceTemplate[],
  settingsFor: (id: string) => ResourceSettings | undefined,
): ResourceFigures[] {
  const seen = new Set(inUse.map((r) => r.id))
  for (const t of templates) {
    if (t.match.includes('*') || t.keyed || seen.has(t.match)) continue
    const s = settingsFor(t.match)
    if (s === undefined) continue
    seen.add(t.match)
    inUse.push(idleFigures(s))
  }
  return inUse
}

/** A configured resource no client uses: its capacity, nothing committed, asked or leased. */
function idleFigures(s: ResourceSettings): ResourceFigures {
  return {
    id: s.id,
    kind: s.kind,
    capacity: s.capacity,
    committed: 0,
    free: s.capacity,
    demand: 0,
    grant: 0,
    clients: 0,
    learning: false,
    rounds: 0,
  }
}
