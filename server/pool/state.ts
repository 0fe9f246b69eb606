import type { BurstSlack } from './burst-slack.js'
import { windowAt, type ResourceSettings, type WindowSpec } from '../config/index.js'
import type { LeaseGrant } from '../../shared/index.js'
import type { ClientState, Entry, ResourceState } from './entry.js'
import type { Shape } from './shapes/index.js'

/** Where the pool reads a resource's settings; undefined when no template matches the id. */
export type SettingsLookup = (resourceId: string) => ResourceSettings | undefined

/** A batch of leases for one client, to send as one `lease` message. */
export interface LeaseBatch {
  /** The pool's key of the client (see `clientKey`). */
  readonly clientKey: string
  readonly seq: number
  readonly leases: LeaseGrant[]
  /**
   * When its leases were made, on the pool's clock: their lives are counted from then (plus
   * `ledgerMaxWriteMs`), and a quota window's times count from then. What the batch waited
   * before it leaves is taken off as it leaves (coordinator/leaving.ts).
   */
  madeMs?: number | undefined
}

/**
 * The quota window that holds `nowMs`, on the pool's clock: its number and end, and when the
 * next one opens (`nextMs`; at `endMs` when absent: a window may end before the next opens,
 * coordinator/quota-clock.ts).
 */
export type QuotaClock = (
  spec: WindowSpec,
  nowMs: number,
) => { index: number; startMs: number; endMs: number; nextMs?: number }

/** Windows on the pool's own clock taken as the wall clock (tests, the simulator). */
export const sameClockWindows: QuotaClock = (spec, nowMs) => windowAt(spec, nowMs)

/** How a pool is made: see `Pool`'s constructor. */
export interface PoolOptions {
  learn?: boolean
  track?: boolean
  sendDelayMs?: number
  quotaClock?: QuotaClock
  /**
   * Since when the pool knows every lease that may be enforced (what it restored, what it
   * sends): default `startMs`; -Infinity for a ledger that has never been written (nothing
   * was ever leased).
   */
  quietSinceMs?: number
}

/** Shared empty answers: most reports change nothing, and need not allocate to say so. */
export const noBatches: readonly LeaseBatch[] = Object.freeze([])
export const noResources: readonly string[] = Object.freeze([])

/**
 * Everything one pool knows, in one place: the registry of clients and
 * resources (and a family's hot keys, and what each tenant uses), the lease
 * batches being made, and what changed for the ledger. The pool's rooms
 * (registry.ts, send.ts, hot-keys.ts, rounds.ts, ledger-projection.ts,
 * queries.ts, and a shape per kind of resource in shapes/) are functions
 * over it; `Pool` is their facade.
 */
export class PoolState {
  readonly clients = new Map<string, ClientState>()
  readonly resources = new Map<string, ResourceState>()
  /** Per keyed family (its own resource id), the resources of its keys now in the pool (hot keys). */
  readonly familyKeys = new Map<string, Set<ResourceState>>()
  /** Per family and tenant (`hotSlotKey`), how many of the family's hot keys are that tenant's. */
  readonly hotKeysByTenant = new Map<string, number>()
  /** Per tenant, the resources its clients use and how many of them use each. */
  readonly tenantResources = new Map<string, Map<string, number>>()
  /**
   * Resources forgotten (no entries) whose last lease may still be enforced, or was lately, and
   * what of their burst nobody may hold (`slack`), which a new state of them takes up.
   */
  readonly quietAfter = new Map<
    string,
    { heldUntilMs: number; refillMs: number; slack?: BurstSlack | undefined }
  >()
  /** Resources whose acks or releases left increases waiting (see `takeWaiting`). */
  readonly waiting = new Set<string>()
  /**
   * Tokens named rate resources' holders gave up as their leases fell, said in the ack being
   * handled (clients.ts `acknowledge`), for the rises granted while it is handled (lease-out.ts,
   * `fill`); emptied once it is handled, as BurstSlack's property models a named rate's
   * ('move', 'moveTwo'). A hot key keeps its gifts for the rise they pay for (entry.ts,
   * `giftTokens`, checked by the family model).
   */
  readonly handBack = new Map<string, number>()
  /** The batch being made for each client, until the flush. */
  batches = new Map<ClientState, LeaseBatch>()
  // One sequence for all batches of this pool: a client id that is forgotten and comes back
  // never sees a sequence number reused, so a late ack can never match a newer batch.
  lastSeq = 0
  /** Keys given to set-aside clients so far. */
  replaced = 0
  /** Whether resources re-learn for learningMs when they first appear (no trusted ledger). */
  learn: boolean
  /** Entries whose leases changed since the last `takeChanges`, and entries gone. */
  readonly dirty = new Set<Entry>()
  readonly removed: { clientKey: string; resource: string }[] = []
  /**
   * Shards of the coordinator's own part's reservations raised since the last `takeChanges`
   * (central-spend.ts): per entry, per window, the shards to write.
   */
  readonly reserveDirty = new Map<Entry, Map<number, Set<number>>>()
  readonly startMs: number
  readonly quietSinceMs: number
  readonly settingsFor: SettingsLookup
  /** Whether changes are kept for a ledger (`takeChanges`); without one nothing piles up. */
  readonly track: boolean
  /** Longest a batch may wait between a call returning it and its sending. */
  readonly sendDelayMs: number
  /** Quota windows on this pool's clock. */
  readonly quotaClock: QuotaClock
  /** The shape a resource of these settings takes (shapes/index.ts), chosen when its state is made. */
  readonly shapeOf: (settings: ResourceSettings) => Shape

  constructor(
    startMs: number,
    settingsFor: SettingsLookup,
    shapeOf: (settings: ResourceSettings) => Shape,
    options: PoolOptions,
  ) {
    this.shapeOf = shapeOf
    this.startMs = startMs
    this.quietSinceMs = options.quietSinceMs ?? startMs
    this.settingsFor = settingsFor
    this.learn = options.learn ?? true
    this.track = options.track ?? false
    this.sendDelayMs = options.sendDelayMs ?? 0
    this.quotaClock = options.quotaClock ?? sameClockWindows
  }

  /** The entry's leases changed: the ledger's next write takes it. */
  touch(entry: Entry): void {
    if (this.track) this.dirty.add(entry)
  }

  /** The entry is gone: the ledger's next write removes it. */
  gone(key: { clientKey: string; resource: string }): void {
    if (this.track) this.removed.push(key)
  }

  /** The quota window in force for `r` at `nowMs`; undefined for a resource without one. */
  windowOf(r: ResourceState, nowMs: number): ReturnType<QuotaClock> | undefined {
    const spec = r.settings.quotaWindow
    return spec === undefined ? undefined : this.quotaClock(spec, nowMs)
  }
}

/**
 * The pool's key for a client: its id, scoped by tenant, so two tenants can
 * never name (and so replace) the same client.
 */
export function clientKey(tenant: string | undefined, clientId: string): string {
  return tenant === undefined ? clientId : `${tenant}\u0000${clientId}`
}

/** The key of a family's hot-key slots of one tenant. */
export function hotSlotKey(familyId: string, tenant: string): string {
  return `${familyId}\u0000${tenant}`
}
