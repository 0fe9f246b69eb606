import type { Clock, Timer, Usage } from '../../shared/index.js'
import { ResourceHistory, historyFields, type HistoryField, type HistorySeries } from './history.js'
import type { CoordinatorMetrics } from './metrics.js'
import { clientKey } from '../pool/index.js'
import {
  UsageBook,
  type ClientIdentity,
  type ClientUsage,
  type RecentUsage,
  type ResourceUsage,
} from './usage.js'
import type { FamilyUsageFigures, ResourceView } from './view.js'

export interface ObserverOptions {
  readonly clock: Clock
  readonly view: ResourceView
  readonly metrics: CoordinatorMetrics
  /** Most resources with a history (the oldest unused one goes first). */
  readonly maxHistoryResources: () => number
  /** Whether the pool still knows a client (its usage is forgotten when not). */
  readonly knows: (key: string) => boolean
}

const sampleMs = 1000

/**
 * What an operator sees of the limit at work: clients' usage (UsageBook),
 * sampled every second with the resource's capacity, committed and demand
 * into a bounded history per resource, and counted in Prometheus counters.
 */
export class Observer {
  readonly usage = new UsageBook()
  readonly #o: ObserverOptions
  readonly #histories = new Map<string, { history: ResourceHistory; seenMs: number }>()
  readonly #values = new Float64Array(historyFields.length)
  #timer: Timer | undefined
  #samples = 0

  constructor(options: ObserverOptions) {
    this.#o = options
  }

  /** Starts sampling every second. */
  start(): void {
    this.#timer ??= this.#o.clock.setInterval(() => this.sample(), sampleMs).unref()
  }

  close(): void {
    this.#timer?.cancel()
    this.#timer = undefined
  }

  /** A report's usage: kept for the status API, counted in Prometheus. */
  record(resource: string, key: string, tenant: string | undefined, usage: Usage): void {
    this.usage.record(resource, key, usage, this.#o.clock.now())
    this.#o.metrics.usageTotals.add(resource, tenant, usage)
    const family = this.#o.view.familyShare(resource)
    if (family !== undefined)
      this.#o.metrics.familyTotals.add(family.familyId, usage, family.windowEndMs)
  }

  /**
   * Each keyed family in use (ResourceView.families) with what every key admitted and refused
   * together as the processes report it, and a keyed quota's use in the window in force.
   */
  families(top = 20): FamilyUsageFigures[] {
    const nowMs = this.#o.clock.now()
    return this.#o.view.families(top).map((f) => {
      const u = this.usage.current(f.id, nowMs)
      return {
        ...f,
        admittedPerSec: u.admittedPerSec,
        refusedPerSec: u.refusedPerSec,
        ...(f.window === undefined
          ? {}
          : { windowUsed: this.#o.metrics.familyTotals.windowUsed(f.id, nowMs) }),
      }
    })
  }

  /** Takes one sample of every resource with clients (the timer calls it every second). */
  sample(): void {
    const nowMs = this.#o.clock.now()
    const wallMs = this.#o.clock.wallNow()
    const v = this.#values
    for (const r of this.#o.view.resources()) {
      const entry = this.#historyFor(r.id, nowMs)
      if (entry === undefined) continue
      const u = this.usage.current(r.id, nowMs)
      v[0] = r.capacity
      v[1] = r.committed
      v[2] = r.demand
      v[3] = u.admittedPerSec
      v[4] = u.refusedPerSec
      v[5] = u.inFlight
      v[6] = u.waiting
      v[7] = r.clients
      entry.history.add(wallMs, v)
      entry.seenMs = nowMs
    }
    // Every 5 s: each client's recent rates; every 10 s: forget the clients the pool forgot.
    if (++this.#samples % 5 === 0) this.usage.sampleRecent(nowMs, wallMs)
    if (this.#samples % 10 === 0) this.#prune()
  }

  /** A resource's usage now. */
  current(id: string): ResourceUsage {
    return this.usage.current(id, this.#o.clock.now())
  }

  /** One client's latest usage of a resource, its age, and who it says it is. */
  client(
    id: string,
    tenant: string | undefined,
    clientId: string,
  ): { usage: ClientUsage | undefined; ageMs: number; identity: ClientIdentity | undefined } {
    const key = clientKey(tenant, clientId)
    const usage = this.usage.client(id, key, this.#o.clock.now())
    return {
      usage,
      ageMs: usage === undefined ? Infinity : this.#o.clock.now() - usage.atMs,
      identity: this.usage.identity(key),
    }
  }

  /** One client's rates of a resource over the last minutes (every 5 s), or undefined. */
  clientRecent(id: string, tenant: string | undefined, clientId: string): RecentUsage | undefined {
    return this.usage.recent(id, clientKey(tenant, clientId))
  }

  /** Wall-clock ms of a time on the coordinator's clock. */
  wallOf(monoMs: number): number {
    return this.#o.clock.wallNow() - (this.#o.clock.now() - monoMs)
  }

  /** A resource's samples between two wall-clock times (ms since the epoch). */
  history(id: string, fromMs: number, toMs: number): HistorySeries | undefined {
    const found = this.#histories.get(id)
    if (found !== undefined) return found.history.range(fromMs, toMs)
    // A resource the pool knows but has not sampled yet (it appeared within the last second,
    // or while learning): no samples yet, not an unknown resource.
    if (this.#o.view.resource(id) === undefined) return undefined
    const columns = {} as Record<HistoryField, number[]>
    for (const f of historyFields) columns[f] = []
    return { stepMs: sampleMs, t: [], columns }
  }

  /** Resources with a history now. */
  get historyCount(): number {
    return this.#histories.size
  }

  #historyFor(id: string, nowMs: number): { history: ResourceHistory; seenMs: number } | undefined {
    const found = this.#histories.get(id)
    if (found !== undefined) return found
    const max = this.#o.maxHistoryResources()
    if (max === 0) return undefined
    if (this.#histories.size >= max) {
      // Make room: the history not sampled for longest goes, unless every one is in use now.
      let oldest: string | undefined
      let oldestMs = Infinity
      for (const [k, e] of this.#histories)
        if (e.seenMs < oldestMs) [oldest, oldestMs] = [k, e.seenMs]
      if (oldest === undefined || oldestMs >= nowMs) return undefined
      this.#histories.delete(oldest)
    }
    const entry = { history: new ResourceHistory(), seenMs: nowMs }
    this.#histories.set(id, entry)
    return entry
  }

  #prune(): void {
    for (const key of this.usage.keys()) if (!this.#o.knows(key)) this.usage.forgetClient(key)
  }
}
