import type { ResourceSettings } from '../config/index.js'
import type { ResourceState } from './entry.js'
import { familyIdOf, keyIdOf, shareOfKey } from '../../shared/index.js'
import type {
  ClientSnapshot,
  KeyHolder,
  KeyLookup,
  QuotaWindowSnapshot,
  ResourceSnapshot,
} from './snapshot.js'
import { hotSlotKey, type PoolState } from './state.js'

/**
 * What the pool answers without changing anything: counts, look-ups and
 * frozen snapshots for status, metrics and admission. `Pool` is this view
 * with the operations that change the state.
 */
export class PoolView {
  protected readonly state: PoolState

  constructor(state: PoolState) {
    this.state = state
  }

  /** Clients known to the pool: connected, or holding commitments that have not lapsed. */
  get clientCount(): number {
    return this.state.clients.size
  }

  get resourceCount(): number {
    return this.state.resources.size
  }

  /** Clients connected now (of one tenant, when given). */
  connectedCount(tenant?: string): number {
    let n = 0
    for (const c of this.state.clients.values())
      if (c.connected && (tenant === undefined || c.tenant === tenant)) n++
    return n
  }

  /** Ids of the resources that have clients, in the order they first appeared. */
  resourceIds(): string[] {
    return [...this.state.resources.keys()]
  }

  hasResource(resourceId: string): boolean {
    return this.state.resources.has(resourceId)
  }

  /** Whether the pool knows this client (connected, or disconnected with leases). */
  hasClient(key: string): boolean {
    return this.state.clients.has(key)
  }

  /** Whether a known client is connected now. */
  isConnected(key: string): boolean {
    return this.state.clients.get(key)?.connected === true
  }

  /** How many distinct resources the clients of `tenant` use. */
  tenantResourceCount(tenant: string): number {
    return this.state.tenantResources.get(tenant)?.size ?? 0
  }

  /** Whether a client of `tenant` uses `resourceId`. */
  tenantUses(tenant: string, resourceId: string): boolean {
    return this.state.tenantResources.get(tenant)?.has(resourceId) === true
  }

  /** How many resources a client uses, the keys of keyed families left out. */
  subscriptionCount(key: string): number {
    const client = this.state.clients.get(key)
    return client === undefined ? 0 : client.entries.size - client.keyEntries
  }

  isSubscribed(key: string, resourceId: string): boolean {
    return this.state.clients.get(key)?.entries.has(resourceId) === true
  }

  /** Keys of the clients using a resource. */
  subscribers(resourceId: string): string[] {
    const r = this.state.resources.get(resourceId)
    return r === undefined ? [] : [...r.entries.keys()]
  }

  /** The settings a resource is run with now. */
  settings(resourceId: string): ResourceSettings | undefined {
    return this.state.resources.get(resourceId)?.settings
  }

  /** Σ committed of a resource at `nowMs`: leases lapsed by then do not count. */
  committed(resourceId: string, nowMs: number): number {
    const r = this.state.resources.get(resourceId)
    if (r === undefined) return 0
    let sum = 0
    for (const e of r.entries.values()) sum += e.committedAt(nowMs)
    return sum
  }

  /**
   * What the pool means one client to hold of one resource (its target: the share or rate of its
   * next lease), 0 when it holds none or is not connected. Above what the client holds, a rise
   * is coming: sent, or waiting for the falls that pay for it to be acknowledged.
   */
  meantFor(key: string, resourceId: string): number {
    const e = this.state.clients.get(key)?.entries.get(resourceId)
    return e === undefined || !e.client.connected ? 0 : e.target
  }

  /** What one client is committed of one resource at `nowMs` (0 when it holds nothing). */
  committedBy(key: string, resourceId: string, nowMs: number): number {
    return this.state.clients.get(key)?.entries.get(resourceId)?.committedAt(nowMs) ?? 0
  }

  isLearning(resourceId: string, nowMs: number): boolean {
    const r = this.state.resources.get(resourceId)
    return r !== undefined && nowMs < r.learningUntilMs
  }

  /** A resource's figures at `nowMs`, or undefined when nobody uses it. */
  snapshot(resourceId: string, nowMs: number): ResourceSnapshot | undefined {
    const r = this.state.resources.get(resourceId)
    if (r === undefined) return undefined
    let demand = 0
    let grant = 0
    for (const e of r.entries.values()) {
      demand += e.client.connected ? e.history.estimate() : 0
      grant += e.target
    }
    return Object.freeze({
      id: resourceId,
      settings: r.settings,
      committed: this.committed(resourceId, nowMs),
      demand,
      grant,
      clients: r.entries.size,
      learning: nowMs < r.learningUntilMs,
      rounds: r.rounds,
      window: this.windowSnapshot(r, nowMs),
    })
  }

  private windowSnapshot(r: ResourceState, nowMs: number): QuotaWindowSnapshot | undefined {
    const spec = r.settings.quotaWindow
    if (spec === undefined) return undefined
    const w = this.state.quotaClock(spec, nowMs)
    let used = 0
    for (const e of r.entries.values()) if (e.usedWindow === w.index) used += e.used
    return {
      index: w.index,
      endsInMs: Math.max(0, Math.round(w.endMs - nowMs)),
      lengthMs: Math.round(w.endMs - w.startMs),
      used,
    }
  }

  /** Each client of a resource as the pool sees it at `nowMs`. */
  clientSnapshots(resourceId: string, nowMs: number): ClientSnapshot[] {
    const r = this.state.resources.get(resourceId)
    if (r === undefined) return []
    const out: ClientSnapshot[] = []
    for (const e of r.entries.values()) {
      out.push(
        Object.freeze({
          id: e.client.clientId,
          tenant: e.client.tenant,
          connected: e.client.connected,
          wants: e.history.last,
          estimatedDemand: e.history.estimate(),
          target: e.target,
          lease: e.newest,
          committed: e.committedAt(nowMs),
          weight: e.weight,
          priority: e.priority,
          lastSentMs: e.lastSentMs,
        }),
      )
    }
    return out
  }

  /**
   * How many keys of a family are leased one by one now (its hot keys); of those, with
   * `tenant`, how many that tenant's clients made hot (its slots).
   */
  hotKeyCount(familyId: string, tenant?: string): number {
    if (tenant !== undefined)
      return this.state.hotKeysByTenant.get(hotSlotKey(familyId, tenant)) ?? 0
    return this.state.familyKeys.get(familyId)?.size ?? 0
  }

  /**
   * One key of the family of `prefix` as the pool knows it now: its limit, who may use how
   * much of it, and (a quota's key leased on its own) what was used. Undefined when no
   * template makes `prefix` a keyed family.
   */
  keyLookup(prefix: string, key: string, nowMs: number): KeyLookup | undefined {
    const keyId = keyIdOf(prefix, key)
    const own = this.state.resources.get(keyId)
    const settings = own?.settings ?? this.state.settingsFor(keyId)
    if (settings?.family === undefined) return undefined
    const shares = this.state.resources.get(familyIdOf(prefix))
    const source = own ?? shares
    const w = source === undefined ? undefined : this.state.windowOf(source, nowMs)
    const holders: KeyHolder[] = []
    let committed = 0
    let used: number | undefined
    if (own !== undefined)
      for (const e of own.entries.values()) {
        const c = e.committedAt(nowMs)
        committed += c
        const u = w !== undefined && e.usedWindow === w.index ? e.used : undefined
        if (u !== undefined) used = (used ?? 0) + u
        holders.push({
          client: e.client.clientId,
          tenant: e.client.tenant,
          connected: e.client.connected,
          capacity: e.newest,
          committed: c,
          ...(u === undefined ? {} : { used: u }),
        })
      }
    else if (shares !== undefined)
      for (const e of shares.entries.values()) {
        const c = shareOfKey(settings.kind, e.committedAt(nowMs), settings.capacity)
        committed += c
        holders.push({
          client: e.client.clientId,
          tenant: e.client.tenant,
          connected: e.client.connected,
          capacity: shareOfKey(settings.kind, e.newest, settings.capacity),
          committed: c,
        })
      }
    return {
      family: settings.family.familyId,
      key,
      kind: settings.kind,
      capacity: settings.capacity,
      burst: settings.burst,
      ...(w === undefined
        ? {}
        : {
            window: {
              index: w.index,
              lengthMs: Math.round(w.endMs - w.startMs),
              endsInMs: Math.max(0, Math.round(w.endMs - nowMs)),
            },
          }),
      leasedOnItsOwn: own !== undefined,
      holders,
      committed,
      ...(own !== undefined && w !== undefined ? { used: used ?? 0 } : {}),
      ...(own?.reset === undefined || w === undefined || own.reset.window !== w.index
        ? {}
        : { reset: { pending: own.reset.askedMs !== undefined, givenBack: own.reset.units } }),
    }
  }
}
