import type { RemoteAnswer } from '../remote.js'
import type { Usage } from '../../shared/index.js'
import type { LeaseGrant } from '../../shared/index.js'

/** `client.keyed(prefix, options)`. */
export interface KeyedOptions {
  /** Keys tracked in this process at once (least recently used go first); default 50 000. */
  readonly maxKeys?: number | undefined
  /** Keys reported in one demand report as wanting more than the default share; default 64. */
  readonly maxKeysPerReport?: number | undefined
  /** Share relative to the family's other holders; default 1. */
  readonly weight?: number | undefined
}

/** What one key may use in this process now, and where that comes from. */
export interface KeyLease {
  /** Tokens/s (rate), slots (concurrency), or units of the window's budget (quota). */
  readonly capacity: number
  /** Tokens the key's bucket holds at most (rate); slots for concurrency; the budget for a quota. */
  readonly burst: number
  /**
   * `default`: this process's default share of every key (the family lease); `key`: the
   * key's own lease; `fallback`: a lapsed lease's safe fallback; `none`: nothing (no lease yet,
   * or everything lapsed).
   */
  readonly source: 'default' | 'key' | 'fallback' | 'none'
  /** A keyed quota's: the window this budget is of (the coordinator counts what is spent in it). */
  readonly window?: number | undefined
}

/** The events of a keyed family: each family lease received, and each change of mode. */
export interface KeyedEvents {
  lease: [lease: LeaseGrant]
  mode: [mode: 'leased' | 'lapsed' | 'none']
}

/** What the family needs of the client that owns it. */
export interface KeyedOwner {
  /** An early report (`soon`: at once, not after the usual delay). */
  requestEarlyReport(soon?: boolean): void
  drained(): void
  /**
   * Asks the coordinator to decide `cost` of `resource` (a key's id) against what it holds.
   * An owner without it (a unit test's) refuses every remote ask.
   */
  askRemote?(resource: string, cost: number): Promise<RemoteAnswer>
  /**
   * Whether a connection to the coordinator is up (a next window's lease can come): a check at
   * a quota window's edge waits for it only then. An owner without it (a unit test's) counts as up.
   */
  readonly connected?: boolean
}

/**
 * A keyed quota's units of one key counted spent in a process (`KeyedFamily.spentOf`): in the
 * window of its budget (`window`, NaN: none) and of the next window, spent ahead of its start
 * (`nextWindow`, -1: none).
 */
export interface KeySpent {
  window: number
  used: number
  nextWindow: number
  nextUsed: number
}

/** One entry of a family's demand report. */
export interface KeyReport {
  resource: string
  wants: number
  weight?: number
  used?: number
  /** Of `used`, the units handed on with a share (spent elsewhere): shared/protocol/messages.ts. */
  charged?: number
  window?: number
  /** The family's entry: what its keys admitted and refused together since the last report. */
  usage?: Usage
  /** The family's entry: checks here ask the coordinator what this process cannot decide. */
  remote?: boolean
  /** A key leased here on its own, never asked for here (shared/protocol/messages.ts). */
  unasked?: true
  /** A key whose checks here wait for its own lease (shared/protocol/messages.ts). */
  waits?: true
}
