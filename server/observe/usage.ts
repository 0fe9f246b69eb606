import type { Usage } from '../../shared/index.js'

/**
 * One client's usage of one resource, as rates: each report's counts, spread
 * over the window they cover, are added to sums that decay with a time
 * constant of `usageTauMs`. A steady stream then reads as its exact rate
 * whatever the report period (early reports included), with no ripple
 * between reports; a client that misses its reports fades to 0.
 */
export interface ClientUsage {
  /** When its latest report came. */
  readonly atMs: number
  readonly admittedPerSec: number
  readonly refusedPerSec: number
  readonly admittedCallsPerSec: number
  readonly refusedCallsPerSec: number
  /** Callers waiting, slots in flight and their peak, as the latest report said. */
  readonly waiting: number
  readonly inFlight: number | undefined
  readonly peakInFlight: number | undefined
  /** When a report last said something was refused; undefined if never. */
  readonly lastRefusedAtMs: number | undefined
  /**
   * When its current run of refusals began (reports with refusals, none
   * more than `refusingMs` apart), while it lasts; else undefined.
   */
  readonly refusingSinceMs: number | undefined
}

/** Time constant of the usage rates. */
export const usageTauMs = 5000

/** A client is "refusing" while its reports said so within this long. */
export const refusingMs = 5000

/**
 * Refusals worth calling "refusing": 1% of the calls or more, over the usage time constant.
 * A client that gets what it asks for but refuses a stray call now and then (a burst over its
 * bucket: 0.5/s of 100/s asked) is not refusing.
 */
export function refusingMuch(refused: number, admitted: number): boolean {
  return refused > 0 && refused >= 0.01 * (refused + admitted)
}

interface Sums {
  atMs: number
  windowMs: number
  admitted: number
  refused: number
  admittedCalls: number
  refusedCalls: number
  waiting: number
  inFlight: number | undefined
  peakInFlight: number | undefined
  lastRefusedAtMs: number | undefined
  /** When a report last said it refused much (`refusingMuch`). */
  lastRefusingAtMs: number | undefined
  refusingSinceMs: number | undefined
  /** Its recent rates, admitted and refused interleaved, a ring of `recentShape.samples`. */
  recent: Float32Array | undefined
  recentNext: number
  recentCount: number
}

/** Per client and resource, the admitted and refused rates every 5 s over the last 5 minutes. */
export const recentShape = Object.freeze({ stepMs: 5000, samples: 60 })

/** Bytes the recent rates take per client and resource (the typed array, not its header). */
export const recentBytesPerClient = recentShape.samples * 2 * 4

/** One client's recent rates, oldest first. */
export interface RecentUsage {
  readonly stepMs: number
  /** Sample times, ms since the epoch. */
  readonly t: number[]
  readonly admittedPerSec: number[]
  readonly refusedPerSec: number[]
}

/** The decayed weight, at its end, of a steady stream over `windowMs` (1 for an instant). */
function spread(windowMs: number): number {
  const x = windowMs / usageTauMs
  return x < 1e-6 ? 1 : (1 - Math.exp(-x)) / x
}

function rates(s: Sums, nowMs: number): ClientUsage {
  // Until the next report is due (half a window late at most), the last one stands.
  const lateMs = nowMs - s.atMs - 1.5 * Math.max(1000, s.windowMs)
  const k = (lateMs > 0 ? Math.exp(-lateMs / usageTauMs) : 1) * (1000 / usageTauMs)
  return {
    atMs: s.atMs,
    admittedPerSec: s.admitted * k,
    refusedPerSec: s.refused * k,
    admittedCallsPerSec: s.admittedCalls * k,
    refusedCallsPerSec: s.refusedCalls * k,
    waiting: s.waiting,
    inFlight: s.inFlight,
    peakInFlight: s.peakInFlight,
    lastRefusedAtMs: s.lastRefusedAtMs,
    refusingSinceMs:
      s.lastRefusingAtMs !== undefined && nowMs - s.lastRefusingAtMs <= refusingMs
        ? s.refusingSinceMs
        : undefined,
  }
}

/** A resource's usage now: the sum over its clients. */
export interface ResourceUsage {
  readonly admittedPerSec: number
  readonly refusedPerSec: number
  readonly waiting: number
  readonly inFlight: number
  /** Clients with usage counted. */
  readonly reporting: number
  /** Clients that refused something within the last 5 s. */
  readonly refusing: number
}

/** Who a client says it is (hello). */
export interface ClientIdentity {
  readonly name: string | undefined
  readonly library: string | undefined
}

const noUsage: ResourceUsage = Object.freeze({
  admittedPerSec: 0,
  refusedPerSec: 0,
  waiting: 0,
  inFlight: 0,
  reporting: 0,
  refusing: 0,
})

/**
 * What clients' limiters actually did, from the usage in their reports: per
 * resource and client, the latest report as rates; and who each client says
 * it is. Observability only: the allocation never reads it. Bounded by the
 * pool's own bounds (one entry per client and resource it uses); a client's
 * entries go when it is forgotten.
 */
export class UsageBook {
  readonly #byResource = new Map<string, Map<string, Sums>>()
  readonly #resourcesOf = new Map<string, Set<string>>()
  readonly #identities = new Map<string, ClientIdentity>()

  /** A report's usage of one resource, from client `key`. */
  record(resource: string, key: string, usage: Usage, nowMs: number): void {
    let clients = this.#byResource.get(resource)
    if (clients === undefined) this.#byResource.set(resource, (clients = new Map<string, Sums>()))
    let resources = this.#resourcesOf.get(key)
    if (resources === undefined) this.#resourcesOf.set(key, (resources = new Set()))
    resources.add(resource)
    let s = clients.get(key)
    if (s === undefined) {
      s = {
        atMs: nowMs,
        windowMs: usage.windowMs,
        admitted: 0,
        refused: 0,
        admittedCalls: 0,
        refusedCalls: 0,
        waiting: 0,
        inFlight: undefined,
        peakInFlight: undefined,
        lastRefusedAtMs: undefined,
        lastRefusingAtMs: undefined,
        refusingSinceMs: undefined,
        recent: undefined,
        recentNext: 0,
        recentCount: 0,
      }
      clients.set(key, s)
    }
    const k = Math.exp(-Math.max(0, nowMs - s.atMs) / usageTauMs)
    const w = spread(usage.windowMs)
    s.atMs = nowMs
    s.windowMs = usage.windowMs
    s.admitted = s.admitted * k + usage.admitted * w
    s.refused = s.refused * k + usage.refused * w
    s.admittedCalls = s.admittedCalls * k + usage.admittedCalls * w
    s.refusedCalls = s.refusedCalls * k + usage.refusedCalls * w
    s.waiting = usage.waiting
    s.inFlight = usage.inFlight
    s.peakInFlight = usage.peakInFlight
    if (usage.refusedCalls > 0) {
      s.lastRefusedAtMs = nowMs
      if (refusingMuch(s.refusedCalls, s.admittedCalls)) {
        if (s.lastRefusingAtMs === undefined || nowMs - s.lastRefusingAtMs > refusingMs)
          s.refusingSinceMs = nowMs
        s.lastRefusingAtMs = nowMs
      }
    }
  }

  /** Wall-clock time of the latest recent sample (all clients are sampled together). */
  #recentAtWallMs = 0

  /** Samples every client's rates into its recent ring (the observer calls it every 5 s). */
  sampleRecent(nowMs: number, wallMs: number): void {
    const n = recentShape.samples
    for (const clients of this.#byResource.values())
      for (const s of clients.values()) {
        const u = rates(s, nowMs)
        s.recent ??= new Float32Array(2 * n)
        s.recent[2 * s.recentNext] = u.admittedPerSec
        s.recent[2 * s.recentNext + 1] = u.refusedPerSec
        s.recentNext = (s.recentNext + 1) % n
        if (s.recentCount < n) s.recentCount++
      }
    this.#recentAtWallMs = wallMs
  }

  /** A client's recent rates of a resource, or undefined before its first sample. */
  recent(resource: string, key: string): RecentUsage | undefined {
    const s = this.#byResource.get(resource)?.get(key)
    if (s?.recent === undefined) return undefined
    const n = recentShape.samples
    const out = {
      stepMs: recentShape.stepMs,
      t: [] as number[],
      admittedPerSec: [] as number[],
      refusedPerSec: [] as number[],
    }
    for (let k = 0; k < s.recentCount; k++) {
      const i = (s.recentNext - s.recentCount + k + n) % n
      out.t.push(this.#recentAtWallMs - (s.recentCount - 1 - k) * recentShape.stepMs)
      out.admittedPerSec.push(s.recent[2 * i]!)
      out.refusedPerSec.push(s.recent[2 * i + 1]!)
    }
    return out
  }

  identify(key: string, identity: ClientIdentity): void {
    this.#identities.set(key, identity)
  }

  identity(key: string): ClientIdentity | undefined {
    return this.#identities.get(key)
  }

  /** The usage of `resource` by client `key`, as rates now. */
  client(resource: string, key: string, nowMs: number): ClientUsage | undefined {
    const s = this.#byResource.get(resource)?.get(key)
    return s === undefined ? undefined : rates(s, nowMs)
  }

  /**
   * The resource's usage now: the sum over its clients (waiting and in
   * flight from reports of the last 3 s: a client that stopped reporting
   * does not hold them any more).
   */
  current(resource: string, nowMs: number): ResourceUsage {
    const clients = this.#byResource.get(resource)
    if (clients === undefined) return noUsage
    let admittedPerSec = 0
    let refusedPerSec = 0
    let waiting = 0
    let inFlight = 0
    let refusing = 0
    for (const s of clients.values()) {
      const u = rates(s, nowMs)
      admittedPerSec += u.admittedPerSec
      refusedPerSec += u.refusedPerSec
      if (nowMs - s.atMs <= 3000) {
        waiting += u.waiting
        inFlight += u.inFlight ?? 0
      }
      if (u.refusingSinceMs !== undefined) refusing++
    }
    return { admittedPerSec, refusedPerSec, waiting, inFlight, reporting: clients.size, refusing }
  }

  /** The client is gone from the pool: its usage and name go too. */
  forgetClient(key: string): void {
    for (const resource of this.#resourcesOf.get(key) ?? []) {
      const clients = this.#byResource.get(resource)
      clients?.delete(key)
      if (clients?.size === 0) this.#byResource.delete(resource)
    }
    this.#resourcesOf.delete(key)
    this.#identities.delete(key)
  }

  /** Every client with usage or a name held. */
  keys(): string[] {
    return [...new Set([...this.#resourcesOf.keys(), ...this.#identities.keys()])]
  }

  /** Clients with usage or a name held (for the memory bound). */
  get size(): number {
    return Math.max(this.#resourcesOf.size, this.#identities.size)
  }
}
