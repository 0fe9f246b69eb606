import type { ResourceSettings } from '../config/index.js'
import { DemandHistory } from './demand.js'

/** One lease as the coordinator counts it: held until `holdUntilMs` (sent + ttl + grace). */
export interface LeaseRecord {
  readonly seq: number
  readonly capacity: number
  /** As sent: leaseTtlMs, or less when a parent's lease ends sooner. */
  readonly ttlMs: number
  readonly holdUntilMs: number
  readonly sentMs: number
}

/** A client process as the pool knows it: connected or not, with its lease sequence. */
export class ClientState {
  readonly id: string
  readonly tenant: string | undefined
  connected = true
  /** Sequence number of the newest batch sent to this client; 0 before any. */
  lastSentSeq = 0
  /** Newest batch the client acknowledged. */
  ackedSeq = 0
  readonly entries = new Map<string, Entry>()

  constructor(id: string, tenant: string | undefined) {
    this.id = id
    this.tenant = tenant
  }
}

/** One resource's pool state: its settings and one entry per client using it. */
export class ResourceState {
  settings: ResourceSettings
  readonly entries = new Map<string, Entry>()
  /** Σ entry.committed, kept incrementally and recomputed exactly each round. */
  committedSum = 0
  /** Entries whose target is above their newest lease, waiting for free capacity. */
  readonly starved = new Set<Entry>()
  learningUntilMs: number
  rounds = 0

  constructor(settings: ResourceSettings, learningUntilMs: number) {
    this.settings = settings
    this.learningUntilMs = learningUntilMs
  }

  /** Differences below this are rounding noise, not lease changes. */
  get epsilon(): number {
    return 1e-9 * Math.max(1, this.settings.capacity)
  }
}

/**
 * One client's use of one resource: its demand history, its target from the
 * last round, and every lease that still counts against the pool.
 */
export class Entry {
  readonly client: ClientState
  readonly resource: ResourceState
  weight = 1
  priority = 0
  readonly history: DemandHistory
  target = 0
  /** Leases still counted, ascending by seq; older ones go when a newer one is acked, or lapse. */
  leases: LeaseRecord[] = []
  /** max capacity over `leases`, as last computed; never below the true value (lapses only lower it). */
  committed = 0

  constructor(client: ClientState, resource: ResourceState) {
    this.client = client
    this.resource = resource
    this.history = new DemandHistory(resource.settings.estimator, resource.settings.window)
  }

  /** Capacity of the newest lease sent; 0 before any. */
  get newest(): number {
    const last = this.leases.at(-1)
    return last === undefined ? 0 : last.capacity
  }

  get lastSentMs(): number {
    return this.leases.at(-1)?.sentMs ?? -Infinity
  }

  /** Life of the newest lease sent. */
  get lastTtlMs(): number {
    return this.leases.at(-1)?.ttlMs ?? this.resource.settings.leaseTtlMs
  }

  /** What this entry commits at `nowMs`, lapses counted, without changing anything. */
  committedAt(nowMs: number): number {
    let max = 0
    for (const l of this.leases) if (l.holdUntilMs > nowMs && l.capacity > max) max = l.capacity
    return max
  }

  /** Drops lapsed leases and recomputes `committed`, keeping the resource's sum in step. */
  refresh(nowMs: number): void {
    if (this.leases.length > 0 && this.leases.some((l) => l.holdUntilMs <= nowMs)) {
      this.leases = this.leases.filter((l) => l.holdUntilMs > nowMs)
    }
    this.#setCommitted()
  }

  /** Records a lease of `ttlMs` as sent now. */
  record(seq: number, capacity: number, ttlMs: number, nowMs: number): void {
    this.leases.push({
      seq,
      capacity,
      ttlMs,
      sentMs: nowMs,
      holdUntilMs: nowMs + ttlMs + this.resource.settings.graceMs,
    })
    this.#setCommitted()
  }

  /** The client has put batch `seq` in force: every older lease of this entry is replaced. */
  acknowledge(seq: number): void {
    let newestAcked = -1
    for (let i = 0; i < this.leases.length; i++) if (this.leases[i]!.seq <= seq) newestAcked = i
    if (newestAcked > 0) this.leases = this.leases.slice(newestAcked)
    this.#setCommitted()
  }

  /** The client gave the resource up: nothing of it counts any more. */
  clear(): void {
    this.leases = []
    this.#setCommitted()
  }

  #setCommitted(): void {
    let max = 0
    for (const l of this.leases) if (l.capacity > max) max = l.capacity
    this.resource.committedSum += max - this.committed
    this.committed = max
  }
}
