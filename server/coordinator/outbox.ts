import { randomBytes } from 'node:crypto'
import type { Logger } from 'pino'
import type { Clock } from '../../shared/index.js'
import type { Ledger, LedgerStamp } from '../ledger/index.js'
import type { CoordinatorMetrics } from '../observe/index.js'
import type { LeaseBatch, Pool } from '../pool/index.js'
import { signBatches, type HoldingsKeys } from './proofs.js'
import type { SessionTable } from './session-table.js'
import { leaveAfter } from './leaving.js'
import { WriteAhead, type WriteAheadHost } from './write-ahead.js'
import type { Timer } from '../../shared/index.js'

/**
 * How often the coordinator gives its ledger a sign of life (`Ledger.markAlive`): a restart
 * after its death resumes its quota windows from no further back than this (and the restart).
 */
export const aliveEveryMs = 250

/** What the outbox reads of the coordinator, each time. */
export interface OutboxHost {
  readonly clock: Clock
  readonly log: Logger
  readonly metrics: CoordinatorMetrics
  readonly sessions: SessionTable
  readonly pool: Pool
  readonly closed: boolean
  readonly keys: HoldingsKeys | undefined
  /** How long a batch may wait for its write and still be sent (`server.ledgerMaxWriteMs`). */
  readonly maxWriteMs: number
  /** A ledger write failed: an elected leader steps down. */
  writeFailed(): void
  /** How far the wall clock is ahead of the quota windows' clock (QuotaWindows.lagMs). */
  windowLagMs(): number
}

/**
 * Where lease batches leave: with a ledger, only once the changes that cover
 * them are written (`WriteAhead`; a failed write sends nothing, its leases
 * stay counted and lapse), signed when a holdings key is set, to each
 * client's live session.
 */
export class Outbox {
  readonly #host: OutboxHost
  /** This process's epoch: ledger entries it writes carry it with its monotonic clock. */
  readonly #epoch = randomBytes(8).toString('hex')
  #writeAhead: WriteAhead | undefined
  #alive: Timer | undefined

  constructor(host: OutboxHost) {
    this.#host = host
  }

  /** The ledger commitments are written to before the leases they cover are sent. */
  get ledger(): Ledger | undefined {
    return this.#writeAhead?.ledger
  }

  /** The id of the ledger this coordinator resumed from or started (a welcome names it). */
  get ledgerId(): string | undefined {
    const id = this.#writeAhead?.ledger.id
    return id === undefined || id === '' ? undefined : id
  }

  attach(ledger: Ledger): void {
    this.#writeAhead = new WriteAhead(ledger, this.#host.clock, this.#writeAheadHost)
    // A file ledger's snapshots come from the pool: it keeps no copy of every entry.
    ledger.snapshotFrom?.(() =>
      this.#stamped((toWallMs, stamp) => this.#host.pool.ledgerEntries(toWallMs, stamp)),
    )
    // Where the quota windows' clock stands, every aliveEveryMs, for a restart after a death.
    this.#alive?.cancel()
    this.#alive = undefined
    if (ledger.markAlive === undefined) return
    const { clock } = this.#host
    const alive = clock.setInterval(() => {
      if (this.#host.closed || this.#writeAhead?.ledger !== ledger) return alive.cancel()
      void ledger.markAlive!(clock.wallNow() - this.#host.windowLagMs())
    }, aliveEveryMs)
    this.#alive = alive.unref()
  }

  /** What the pool gives the ledger, in wall-clock times and stamped with this instant. */
  #stamped<T>(take: (toWallMs: (monoMs: number) => number, stamp: LedgerStamp) => T): T {
    const { clock } = this.#host
    const writtenMs = clock.wallNow()
    const writtenMono = clock.now()
    // Where the quota windows' clock stood, when it is not the wall clock: a restart resumes
    // the windows from there (PoolStart.restore).
    const lag = Math.round(this.#host.windowLagMs())
    // How long writes take now: a restart counts twice that before the last write as downtime.
    const latency = Math.round(this.#writeAhead?.latencyMs(writtenMono) ?? 0)
    return take((monoMs) => monoMs - writtenMono + writtenMs, {
      writtenMs,
      writtenMono,
      epoch: this.#epoch,
      ...(lag === 0 ? {} : { windowLagMs: lag }),
      ...(latency === 0 ? {} : { writeLatencyMs: latency }),
    })
  }

  /**
   * The pool's batches leave: with a ledger, once the write that covers them
   * is durable (WriteAhead.enqueue writes the pool's changes, then
   * delivers); without one, at once. Signed, then delivered to each client's
   * live session (SessionTable.deliver).
   */
  writeThenDeliver(batches: readonly LeaseBatch[]): void {
    if (this.#host.closed) return
    if (this.#writeAhead === undefined) {
      // No ledger: the pool counted the leases from their making, and they leave now.
      const nowMs = this.#host.clock.now()
      for (const b of batches) leaveAfter(b, nowMs - (b.madeMs ?? nowMs), 0)
      return this.#deliver(batches)
    }
    this.#writeAhead.enqueue(batches)
  }

  /**
   * Calls `then` once what the pool changed so far is durable (true), or its write failed
   * (false): at once without a ledger, or with one that writes synchronously and nothing in
   * flight. What the coordinator's own part answers waits on it (spend-reserve.ts).
   */
  afterWrite(then: (ok: boolean) => void): void {
    if (this.#host.closed) return then(false)
    if (this.#writeAhead === undefined) return then(true)
    this.#writeAhead.enqueue([], then)
  }

  /**
   * Calls `then` once the next ledger write, whatever enqueues it, is durable (true) or failed
   * (false), without asking for one: at once without a ledger.
   */
  withNextWrite(then: (ok: boolean) => void): void {
    if (this.#host.closed) return then(false)
    if (this.#writeAhead === undefined) return then(true)
    this.#writeAhead.withNext(then)
  }

  /** Resolves once no ledger write is in flight or queued (tests and orderly shutdown). */
  idle(): Promise<void> {
    return this.#writeAhead?.idle() ?? Promise.resolve()
  }

  #deliver(batches: readonly LeaseBatch[]): void {
    if (batches.length === 0) return
    const { keys, sessions, pool, clock } = this.#host
    const nowMs = clock.now()
    if (keys !== undefined)
      signBatches(
        keys,
        batches,
        (key) => sessions.get(key),
        (resource) => pool.settings(resource)?.graceMs ?? 0,
        clock.wallNow(),
      )
    this.#host.metrics.pushes.inc(sessions.deliver(batches, nowMs))
  }

  /** What the write-ahead queue calls back (read through `#host` each time). */
  readonly #writeAheadHost: WriteAheadHost = ((self: Outbox) => ({
    takeChanges: () =>
      self.#stamped((toWallMs, stamp) => self.#host.pool.takeChanges(toWallMs, stamp)),
    deliver: (batches) => self.#deliver(batches),
    unsent: (batches) => self.#host.pool.unsent(batches),
    failed: () => self.#host.writeFailed(),
    maxWriteMs: () => self.#host.maxWriteMs,
    get metrics() {
      return self.#host.metrics
    },
    get log() {
      return self.#host.log
    },
  }))(this)
}
