import type { Coordinator } from '../coordinator/index.js'

export interface ResourceSummary {
  id: string
  kind: 'rate' | 'concurrency'
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

/** Every resource with clients, as the status API shows it. */
export function resourceSummaries(coordinator: Coordinator, nowMs: number): ResourceSummary[] {
  const out: ResourceSummary[] = []
  for (const [id, r] of coordinator.pool.resources()) {
    const committed = coordinator.pool.committedTotal(id, nowMs)
    let demand = 0
    for (const e of r.entries.values()) demand += e.client.connected ? e.history.estimate() : 0
    out.push({
      id,
      kind: r.settings.kind,
      capacity: r.settings.capacity,
      committed,
      free: Math.max(0, r.settings.capacity - committed),
      demand,
      clients: r.entries.size,
      learning: nowMs < r.learningUntilMs,
      rounds: r.rounds,
    })
  }
  return out.sort((a, b) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0))
}

/** One resource and each of its clients, or undefined when nobody uses it. */
export function resourceDetail(
  coordinator: Coordinator,
  id: string,
  nowMs: number,
): (ResourceSummary & { clientDetails: ClientDetail[] }) | undefined {
  const r = coordinator.pool.resource(id)
  if (r === undefined) return undefined
  const summary = resourceSummaries(coordinator, nowMs).find((s) => s.id === id)!
  const clientDetails: ClientDetail[] = []
  for (const e of r.entries.values()) {
    const sent = e.lastSentMs
    clientDetails.push({
      id: e.client.id,
      connected: e.client.connected,
      tenant: e.client.tenant ?? null,
      wants: e.history.last,
      estimatedDemand: e.history.estimate(),
      target: e.target,
      lease: e.newest,
      committed: e.committed,
      weight: e.weight,
      priority: e.priority,
      leaseAgeMs: Number.isFinite(sent) ? Math.round(nowMs - sent) : null,
    })
  }
  return { ...summary, clientDetails }
}
