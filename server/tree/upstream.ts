import type { Logger } from 'pino'
import { createClient, type Resource, type SluiceClient } from '../../client/index.js'
import {
  clampQuantity,
  clampWeight,
  type Clock,
  type SluiceError,
  type FailureMode,
  type ResourceKind,
} from '../../shared/index.js'

/** What a downstream coordinator may share out of one resource right now. */
export interface UpstreamCapacity {
  readonly kind: ResourceKind
  readonly capacity: number
  readonly burst: number
  /** End of the parent's lease in force; undefined when capacity follows the failure mode. */
  readonly deadlineMs: number | undefined
}

export interface UpstreamOptions {
  readonly urls: readonly string[]
  readonly token?: string | undefined
  readonly clientId: string
  readonly clock: Clock
  readonly logger?: Logger | undefined
}

export interface UpstreamHooks {
  /** The capacity of `resourceId` changed (new lease, lapse, mode change). */
  changed(resourceId: string): void
  /** How much of `resourceId` is committed to this coordinator's own clients. */
  committed(resourceId: string): number
}

/**
 * A downstream coordinator's link to its parent: one client of the parent,
 * one parent resource per resource its own clients use. The parent's lease
 * is the capacity shared out here; lapsed, the resource's failure mode rules
 * (the client library's own logic). A decrease from the parent is
 * acknowledged only once the leases granted here fit it.
 */
export class Upstream {
  readonly client: SluiceClient
  readonly #clock: Clock
  readonly #hooks: UpstreamHooks
  readonly #links = new Map<string, { resource: Resource; deadlineMs: number }>()

  constructor(options: UpstreamOptions, hooks: UpstreamHooks) {
    this.#clock = options.clock
    this.#hooks = hooks
    this.client = createClient({
      url: [...options.urls],
      clientId: options.clientId,
      token: options.token,
      clock: options.clock,
      logger: options.logger,
    })
    this.client.on('error', (error: SluiceError) =>
      options.logger?.warn({ code: error.code }, `parent: ${error.message}`),
    )
  }

  get connected(): boolean {
    return this.client.connected
  }

  /** Starts asking the parent for `resourceId`. */
  link(resourceId: string, kind: ResourceKind, failureMode: FailureMode): void {
    if (this.#links.has(resourceId)) return
    const resource = this.client.resource(resourceId, {
      wants: 0,
      kind,
      failureMode,
      committed: () => this.#hooks.committed(resourceId),
    })
    const link = { resource, deadlineMs: -Infinity }
    this.#links.set(resourceId, link)
    resource.on('lease', (grant: { ttlMs: number }) => {
      link.deadlineMs = this.#clock.now() + grant.ttlMs
      this.#hooks.changed(resourceId)
    })
    resource.on('mode', () => this.#hooks.changed(resourceId))
  }

  /** Gives `resourceId` back to the parent. */
  unlink(resourceId: string): void {
    const link = this.#links.get(resourceId)
    if (link === undefined) return
    this.#links.delete(resourceId)
    link.resource.release()
  }

  capacity(resourceId: string): UpstreamCapacity | undefined {
    const link = this.#links.get(resourceId)
    if (link === undefined) return undefined
    const r = link.resource
    const leased = r.mode === 'leased' && r.lease !== undefined
    const capacity = r.capacity
    return {
      kind: r.kind,
      capacity,
      burst: leased ? r.lease.burst : capacity,
      deadlineMs: leased ? link.deadlineMs : undefined,
    }
  }

  /** Demand and weight reported to the parent from the next report on. */
  report(resourceId: string, wants: number, weight: number): void {
    const link = this.#links.get(resourceId)
    if (link === undefined) return
    link.resource.setWants(clampQuantity(wants))
    link.resource.setWeight(clampWeight(weight))
  }

  /** Leases here shrank: an acknowledgement held back for them may go now. */
  drained(): void {
    this.client.drained()
  }

  close(): Promise<void> {
    return this.client.close()
  }
}
