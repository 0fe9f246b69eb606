import { kindTraits, type ResourceKind } from '../../shared/index.js'
import { isGlob } from '../config/index.js'
import type { Coordinator } from '../coordinator/index.js'
import type { QuotaFigures, ResourceFigures } from '../observe/index.js'

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
  /**
   * How much of the limit is used (not how much is leased): admitted ÷
   * capacity for a rate, slots in flight ÷ capacity for concurrency, used in
   * the window ÷ capacity for a quota.
   */
  utilisation: number
  /** Callers waiting at the clients; slots in flight (concurrency). */
  waiting: number
  inFlight: number
  /** Clients whose latest report refused something. */
  refusing: number
  /** Quota: the window in force (its number, length, time left), used and remaining. */
  quota?: QuotaFigures
  /**
   * A keyed family's own resource (`<prefix>/*`): then `kind` is its keys' kind, `capacity`
   * a key's limit (the plan aside), `committed` what the default shares hold of each key
   * together and `free` the rest; admitted and refused are every key's together.
   */
  family?: {
    prefix: string
    hotKeys: number
    maxHotKeys: number
    /** A keyed quota's window: its length, or its calendar unit. */
    windowMs?: number
    windowUnit?: 'day' | 'week' | 'month'
  }
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
    /** How long ago that was, or null. */
    lastRefusedAgoMs: number | null
    /** How long its current run of refusals has lasted (reports with refusals ≤ 5 s apart), or null when it is not refusing. */
    refusingForMs: number | null
    ageMs: number
  } | null
}

function summary(coordinator: Coordinator, r: ResourceFigures): ResourceSummary {
  const settings = coordinator.settingsFor(r.id)
  const family = settings?.family
  if (family !== undefined && family.familyId === r.id) {
    // Shown as what it is: a limit per key, not a resource of capacity 1.
    const perKey = family.keyCapacity
    const committed = Math.min(perKey, r.committed * perKey)
    return {
      ...plainSummary(coordinator, { ...r, quota: undefined }),
      kind: family.keyKind,
      capacity: perKey,
      committed,
      free: Math.max(0, perKey - committed),
      demand: r.demand,
      utilisation: 0,
      family: {
        prefix: family.prefix,
        hotKeys: coordinator.view.hotKeyCount(family.familyId),
        maxHotKeys: family.maxHotKeys,
        ...(settings?.quotaWindow === undefined
          ? {}
          : settings.quotaWindow.kind === 'fixed'
            ? { windowMs: settings.quotaWindow.ms }
            : { windowUnit: settings.quotaWindow.unit }),
      },
    }
  }
  return plainSummary(coordinator, r)
}

function plainSummary(coordinator: Coordinator, r: ResourceFigures): ResourceSummary {
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
    utilisation:
      r.capacity > 0
        ? (r.quota !== undefined
            ? r.quota.used
            : kindTraits[r.kind].refills
              ? u.admittedPerSec
              : u.inFlight) / r.capacity
        : 0,
    waiting: u.waiting,
    inFlight: u.inFlight,
    refusing: u.refusing,
    ...(r.quota === undefined ? {} : { quota: r.quota }),
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
              lastRefusedAgoMs:
                u.lastRefusedAtMs === undefined ? null : Math.round(nowMs - u.lastRefusedAtMs),
              refusingForMs:
                u.refusingSinceMs === undefined ? null : Math.round(nowMs - u.refusingSinceMs),
              ageMs: Math.round(seen.ageMs),
            },
    }
  })
  return { ...summary(coordinator, r), clientDetails }
}

/** One tenant's share of one resource. */
export interface TenantResource {
  id: string
  kind: ResourceKind
  capacity: number
  /** The most the tenant may hold of it (its cap), or null. */
  cap: number | null
  clients: number
  wants: number
  committed: number
  lease: number
  admittedPerSec: number
  refusedPerSec: number
}

/** A configured tenant and what its clients hold now. */
export interface TenantSummary {
  name: string
  weight: number
  maxClients: number | null
  priorities: [number, number]
  /** Distinct clients of the tenant connected or remembered now. */
  clients: number
  resources: TenantResource[]
}

/** Every configured tenant, with the resources its clients use (none until one connects). */
export function tenantSummaries(coordinator: Coordinator): TenantSummary[] {
  const tenants = Object.entries(coordinator.config.tenants)
  const byName = new Map<string, { resources: TenantResource[]; clients: Set<string> }>()
  for (const [name] of tenants) byName.set(name, { resources: [], clients: new Set() })
  for (const r of coordinator.view.resources()) {
    const shares = new Map<string, TenantResource>()
    for (const c of coordinator.view.clients(r.id)) {
      if (c.tenant === undefined) continue
      const entry = byName.get(c.tenant)
      if (entry === undefined) continue
      entry.clients.add(c.id)
      let share = shares.get(c.tenant)
      if (share === undefined) {
        const cap = coordinator.settingsFor(r.id)?.tenants[c.tenant]?.cap
        share = {
          id: r.id,
          kind: r.kind,
          capacity: r.capacity,
          cap: cap ?? null,
          clients: 0,
          wants: 0,
          committed: 0,
          lease: 0,
          admittedPerSec: 0,
          refusedPerSec: 0,
        }
        shares.set(c.tenant, share)
        entry.resources.push(share)
      }
      const u = coordinator.observer.client(r.id, c.tenant, c.id).usage
      share.clients++
      share.wants += c.wants
      share.committed += c.committed
      share.lease += c.lease
      share.admittedPerSec += u?.admittedPerSec ?? 0
      share.refusedPerSec += u?.refusedPerSec ?? 0
    }
  }
  return tenants.map(([name, t]) => {
    const entry = byName.get(name)!
    return {
      name,
      weight: t.weight,
      maxClients: t.maxClients ?? null,
      priorities: t.priorities,
      clients: entry.clients.size,
      resources: entry.resources,
    }
  })
}
