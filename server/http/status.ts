import type { ResourceKind } from '../../shared/index.js'
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
}

function summary(r: ResourceFigures): ResourceSummary {
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
  }
}

/** Every resource with clients, as the status API shows it. */
export function resourceSummaries(coordinator: Coordinator): ResourceSummary[] {
  return coordinator.view.resources().map(summary)
}

/** One resource and each of its clients, or undefined when nobody uses it. */
export function resourceDetail(
  coordinator: Coordinator,
  id: string,
  nowMs: number,
): (ResourceSummary & { clientDetails: ClientDetail[] }) | undefined {
  const r = coordinator.view.resource(id)
  if (r === undefined) return undefined
  const clientDetails: ClientDetail[] = coordinator.view.clients(id).map((c) => ({
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
  }))
  return { ...summary(r), clientDetails }
}
