import type { Logger } from 'pino'
import type { Clock, ErrorCode } from '../../shared/index.js'
import type { CoordinatorMetrics, Observer } from '../observe/index.js'
import type { LeaseBatch } from '../pool/index.js'
import type { AdmissionContext } from './admission.js'
import type { AuthGuard } from './auth-guard.js'
import type { HoldingsKeys } from './proofs.js'
import type { Rounds } from './rounds.js'
import type { SessionPort } from './session-port.js'
import type { SessionTable } from './session-table.js'
import type { SettingsSource } from './settings.js'

/**
 * What the coordinator's parts (handshake, reports, rounds) read and call of
 * it: one object, read each time, since the pool is replaced on a role change
 * and the config on a reload. Admission reads the same object.
 */
export interface Core extends AdmissionContext {
  readonly clock: Clock
  readonly log: Logger
  readonly metrics: CoordinatorMetrics
  readonly observer: Observer
  readonly guard: AuthGuard
  readonly settings: SettingsSource
  readonly sessions: SessionTable
  readonly rounds: Rounds
  readonly closed: boolean
  /** Signs leases and verifies claimed holdings; without it, no claim is trusted. */
  readonly keys: HoldingsKeys | undefined
  /** The id of the ledger this coordinator resumed from or started (a welcome names it). */
  readonly ledgerId: string | undefined
  /** Whether it started from a trusted ledger (no learning). */
  readonly restored: boolean
  /** What is left of its learning period (0 once restored or over). */
  readonly learningLeftMs: number
  /** Whether this replica may grant now (a leader past its deadline steps down in it). */
  mayGrant(): boolean
  /** Sends lease batches once the ledger covers them. */
  sendLeases(batches: readonly LeaseBatch[]): void
  /** Ends a session with an error (counted). */
  fail(session: SessionPort, code: ErrorCode, detail: string): void
  /** A client witnessed a ledger this one does not know: learn now, as from the start. */
  distrustLedger(): void
}
