import type { ResourceKind } from '../../shared/index.js'
import { isGlob } from '../config/index.js'
import type { Coordinator, ResourceFigures } from '../coordinator/index.js'

/** One resource as `GET /v1/resources` lists it. */
export interface ResourceSummary {
  id: string
  kind: ResourceKind
  capacity: number
  committed: number
  free: number
  demand: number
  clients: number
  learning: boolean
  rounds: number
  /** What the clients' limiters admit and refuse per second (tokens or slots), as they report it. */
  admittedPerSec: number
  refusedPerSec: number
  /** admitted ÷ capacity: how much of the limit is used (not how much is leased). */
  utilisation: number
  /** Callers waiting at the clients; slots in flight (concurrency). */
  waiting: number
  inFlight: number
  /** Clients whose latest report refused something. */
  refusing: number
}

export interface ClientDetail {
  id: string
  connected: boolean
  tenant: string | null
  wants: number
  estimatedDemand: number
  target: number
  lease: number
  committed: number
  weight: number
  priority: number
  leaseAgeMs: number | null
  /** What the client says it is (hello): a name (default host:pid) and its library. */
  name: string | null
  library: string | null
  /** Its latest usage report, or null before one. */
  usage: {
    admittedPerSec: number
    refusedPerSec: number
    waiting: number
    inFlight: number | null
    /** When a report last had refusals (ms since the epoch), or null. */
    lastRefusedAt: number | null
    ageMs: number
  } | null
}

function summary(coordinator: Coordinator, r: ResourceFigures): ResourceSummary {
  const u = coordinator.observer.current(r.id)
  return {
    id: r.id,
    kind: r.kind,
    capacity: r.capacity,
    committed: r.committed,
    free: r.free,
    demand: r.demand,
    clients: r.clients,
    learning: r.learning,
    rounds: r.rounds,
    admittedPerSec: u.admittedPerSec,
    refusedPerSec: u.refusedPerSec,
    utilisation: r.capacity > 0 ? u.admittedPerSec / r.capacity : 0,
    waiting: u.waiting,
    inFlight: u.inFlight,
    refusing: u.refusing,
  }
}

/**
 * Every resource with clients, and every resource the config names exactly
 * (a template whose match is not a glob) before any client uses it, marked
 * by 0 clients: an operator sees what is configured from the start.
 */
export function resourceSummaries(coordinator: Coordinator): ResourceSummary[] {
  const live = coordinator.view.resources().map((r) => summary(coordinator, r))
  const seen = new Set(live.map((r) => r.id))
  for (const t of coordinator.config.resources) {
    if (isGlob(t.match) || seen.has(t.match)) continue
    const s = coordinator.settingsFor(t.match)
    if (s === undefined) continue
    seen.add(t.match)
    live.push({
      id: t.match,
      kind: s.kind,
      capacity: s.capacity,
      committed: 0,
      free: s.capacity,
      demand: 0,
      clients: 0,
      learning: false,
      rounds: 0,
      admittedPerSec: 0,
      refusedPerSec: 0,
      utilisation: 0,
      waiting: 0,
      inFlight: 0,
      refusing: 0,
    })
  }
  return live.sort((a, b) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0))
}

/** The config's glob templates: what ids they match, and their kind and capacity. */
export function templateSummaries(
  coordinator: Coordinator,
): { match: string; kind: ResourceKind; capacity: number }[] {
  return coordinator.config.resources
    .filter((t) => isGlob(t.match))
    .map((t) => ({ match: t.match, kind: t.kind, capacity: t.capacity }))
}

/** One resource and each of its clients, or undefined when nobody uses it. */
export function resourceDetail(
  coordinator: Coordinator,
  id: string,
  nowMs: number,
): (ResourceSummary & { clientDetails: ClientDetail[] }) | undefined {
  const r = coordinator.view.resource(id)
  if (r === undefined) return undefined
  const clientDetails: ClientDetail[] = coordinator.view.clients(id).map((c) => {
    const seen = coordinator.observer.client(id, c.tenant, c.id)
    const u = seen.usage
    return {
      id: c.id,
      connected: c.connected,
      tenant: c.tenant ?? null,
      wants: c.wants,
      estimatedDemand: c.estimatedDemand,
      target: c.target,
      lease: c.lease,
      committed: c.committed,
      weight: c.weight,
      priority: c.priority,
      leaseAgeMs: Number.isFinite(c.lastSentMs) ? Math.round(nowMs - c.lastSentMs) : null,
      name: seen.identity?.name ?? null,
      library: seen.identity?.library ?? null,
      usage:
        u === undefined
          ? null
          : {
              admittedPerSec: u.admittedPerSec,
              refusedPerSec: u.refusedPerSec,
              waiting: u.waiting,
              inFlight: u.inFlight ?? null,
              lastRefusedAt:
                u.lastRefusedAtMs === undefined
                  ? null
                  : Math.round(coordinator.observer.wallOf(u.lastRefusedAtMs)),
              ageMs: Math.round(seen.ageMs),
            },
    }
  })
  return { ...summary(coordinator, r), clientDetails }
}
