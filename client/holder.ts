import type { DemandEntry, LeaseGrant, LeaseProof, SluiceError } from '../shared/index.js'

/**
 * What a rate family's default share holds as it closes (a release's `held`), or gave up as it
 * fell for a joiner (an ack's): of every key not named, `level` of its burst; of each named key,
 * its tokens.
 */
export interface FallHeld {
  resource: string
  level: number
  keys: [string, number][]
  /** An ack's only: what was given goes at this share of each key's rate (fall-gifts.ts). */
  goesAtShare?: number
}

/** What a hello says a holder may enforce now, for a learning coordinator. */
export interface HelloHolding {
  resource: string
  capacity: number
  inFlight?: number
  proof?: LeaseProof
}

/**
 * What the client asks of everything it holds leases for, a named resource
 * (resource.ts) or a keyed family and its keys (keyed/): one list, walked
 * the same way for hellos, reports, leases, acks, refusals and closing.
 */
export interface Holder {
  /** Its resource id: a resource's, or a family's own (`<prefix>/*`). */
  readonly holderId: string
  /** Why the coordinator refuses it, while it does. */
  readonly refused: SluiceError | undefined
  /** Whether a lease of `resourceId` is its own (itself, or a key of it). */
  holds(resourceId: string): boolean
  /** Resolves at its first lease; rejects when it is refused or closed. */
  ready(): Promise<void>
  /** What a hello claims of it (the first entries the holder's own, then its keys'). */
  helloHoldings(): HelloHolding[]
  /** Its entries of a demand report, this period's demand measured and taken. */
  reportEntries(): DemandEntry[]
  /** Puts a lease of `resourceId` in force; true when it may be acknowledged at once. */
  applyLeaseOf(resourceId: string, grant: LeaseGrant): boolean
  /** Tokens the lease of `resourceId` just put in force gave up as it fell (for its ack), taken. */
  takeGave?(resourceId: string): number
  /** What a rate family's default share gave up as it fell for a joiner (for its ack's `held`), taken. */
  takeFallHeld?(resourceId: string): FallHeld | undefined
  /**
   * Whether it has something the coordinator should hear before the next report (a keyed
   * quota's key leased to it unasked: what it spent of it); taken, so asked once.
   */
  takeEarlyReportWish?(): boolean
  /** Whether what is in use (or spent) of `resourceId` fits its lease now: a held-back ack may go. */
  fitsFor(resourceId: string): boolean
  /** The ids it holds leases of, for a release. */
  leasedIds(): string[]
  /** A new connection: whether the coordinator is still learning. */
  connected(learning: boolean): void
  refuse(error: SluiceError): void
  /** Another process took the client id over: nothing is enforced until a new lease comes. */
  revoke(): void
  close(): void
}
