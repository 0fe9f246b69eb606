import type { Logger } from 'pino'
import type { Clock } from '../../shared/index.js'
import type { Ledger, LedgerChange } from '../ledger/index.js'
import type { CoordinatorMetrics } from '../observe/index.js'
import type { LeaseBatch } from '../pool/index.js'
import { leaveAfter } from './leaving.js'

/** What the write-ahead queue needs of the coordinator around it. */
export interface WriteAheadHost {
  /** The pool's changes since the last call, with wall-clock times. */
  takeChanges(): LedgerChange[]
  /** Delivers batches whose changes are durable. */
  deliver(batches: readonly LeaseBatch[]): void
  /** These batches were not sent (their write failed or came too late): renew at the next report. */
  unsent(batches: readonly LeaseBatch[]): void
  /** A write failed (after `unsent`): an elected leader steps down. */
  failed(): void
  /** How long a batch may wait for its write and still be sent (`server.ledgerMaxWriteMs`). */
  maxWriteMs(): number
  readonly metrics: CoordinatorMetrics
  readonly log: Logger
}

/** How long a write's latency counts toward `WriteAhead.latencyMs` after it is done, ms. */
const latencySpanMs = 10_000
/** Most writes `latencyMs` keeps (past it, the oldest go). */
const latencyWrites = 256

interface Item {
  readonly changes: LedgerChange[]
  readonly batches: LeaseBatch[]
  readonly atMs: number
  /** Called once the changes are durable (true), or their write failed (false). */
  readonly then: ((ok: boolean) => void)[]
}

/**
 * Write-ahead: lease batches go out only once the ledger holds the changes
 * that cover them. Writes run one at a time, in order; what comes while one
 * is in flight is written next, as one (group commit). A synchronous ledger
 * (memory) sends at once. Each batch goes out with what it waited taken
 * off (`leaveAfter`): one that waited longer than its leases were counted
 * for goes out shortened by as much, or, with no life left, not at all: its
 * leases lapse and the client is renewed at its next report.
 */
export class WriteAhead {
  readonly #ledger: Ledger
  readonly #clock: Clock
  readonly #host: WriteAheadHost
  /** Batches waiting for the ledger write that covers them, in order. */
  #pending: Item[] = []
  #writing = false
  readonly #idleWaiters: (() => void)[] = []
  /** What waits for the next write to be enqueued, and done (`withNext`). */
  readonly #withNext: ((ok: boolean) => void)[] = []
  /** Writes done lately, oldest first: when, and how long from their changes' taking. */
  readonly #latencies: { doneMs: number; ms: number }[] = []
  /** When the changes of the write in flight were taken (undefined: none is). */
  #inFlightSinceMs: number | undefined = undefined

  constructor(ledger: Ledger, clock: Clock, host: WriteAheadHost) {
    this.#ledger = ledger
    this.#clock = clock
    this.#host = host
  }

  get ledger(): Ledger {
    return this.#ledger
  }

  /**
   * Writes what the pool changed (queued behind a write in flight), then delivers `batches`;
   * `then` is told whether the write went through, after the batches (at once when nothing
   * was to be written and nothing is in flight).
   */
  enqueue(batches: readonly LeaseBatch[], then?: (ok: boolean) => void): void {
    const changes = this.#host.takeChanges()
    if (changes.length === 0 && batches.length === 0 && then === undefined) return
    const thens = this.#withNext.splice(0)
    if (then !== undefined) thens.push(then)
    const item = { changes, batches: [...batches], atMs: this.#clock.now(), then: thens }
    if (this.#writing || this.#pending.length > 0) {
      this.#pending.push(item)
      return
    }
    this.#write([item])
  }

  /**
   * Calls `then` once the next write, whatever enqueues it, is durable (true) or failed
   * (false): what the pool changed until then is in it. Enqueues nothing itself.
   */
  withNext(then: (ok: boolean) => void): void {
    this.#withNext.push(then)
  }

  /**
   * How long writes are taking now, ms: the slowest of those done in the last 10 s, from the
   * taking of their changes to their being durable, and the one in flight (or waiting) so far.
   * Each write says it (`LedgerStamp.writeLatencyMs`): the last write a ledger holds may be
   * about twice that older than its writer's end, which a restart counts as downtime
   * (QuotaWindows.resume).
   */
  latencyMs(nowMs: number): number {
    const done = this.#latencies
    while (done.length > 0 && nowMs - done[0]!.doneMs > latencySpanMs) done.shift()
    let ms = 0
    for (const l of done) if (l.ms > ms) ms = l.ms
    const oldest = this.#inFlightSinceMs ?? this.#pending[0]?.atMs
    return oldest !== undefined && nowMs - oldest > ms ? nowMs - oldest : ms
  }

  /** Resolves once no write is in flight or queued (tests and orderly shutdown). */
  idle(): Promise<void> {
    if (!this.#writing && this.#pending.length === 0) return Promise.resolve()
    return new Promise((resolve) => this.#idleWaiters.push(resolve))
  }

  /** Writes the items' changes as one, then sends their batches (those still in time). */
  #write(items: Item[]): void {
    const changes = items.flatMap((i) => i.changes)
    let written: Promise<void> | void
    try {
      written = changes.length === 0 ? undefined : this.#ledger.write(changes)
    } catch (error) {
      this.#writeFailed(items, error)
      return this.#next()
    }
    if (written === undefined) return this.#done(items)
    this.#writing = true
    this.#inFlightSinceMs = items[0]!.atMs
    const startedMs = this.#clock.now()
    this.#host.metrics.ledgerWrites.inc()
    written.then(
      () => {
        this.#host.metrics.ledgerWriteSeconds.observe((this.#clock.now() - startedMs) / 1000)
        this.#done(items)
      },
      (error: unknown) => {
        this.#writing = false
        this.#inFlightSinceMs = undefined
        this.#writeFailed(items, error)
        this.#next()
      },
    )
  }

  #done(items: readonly Item[]): void {
    this.#writing = false
    this.#inFlightSinceMs = undefined
    const limitMs = this.#host.maxWriteMs()
    const nowMs = this.#clock.now()
    const tookMs = nowMs - items[0]!.atMs
    if (tookMs >= 1) {
      this.#latencies.push({ doneMs: nowMs, ms: tookMs })
      if (this.#latencies.length > latencyWrites) this.#latencies.shift()
    }
    let unsent: LeaseBatch[] | undefined
    /** Clients a batch of which was not sent: none of their later batches made so far goes. */
    let gap: Set<string> | undefined
    let shortened = 0
    for (const item of items) {
      const sent: LeaseBatch[] = []
      for (const batch of item.batches) {
        // From the making of its leases (the pool counted them from then), else the enqueueing.
        const waitedMs = nowMs - (batch.madeMs ?? item.atMs)
        const lateMs = waitedMs - limitMs
        if (gap?.has(batch.clientKey) === true || !leaveAfter(batch, waitedMs, lateMs)) {
          ;(unsent ??= []).push(batch)
          ;(gap ??= new Set()).add(batch.clientKey)
        } else {
          sent.push(batch)
          if (lateMs > 0) shortened++
        }
      }
      this.#host.deliver(sent)
    }
    if (gap !== undefined) this.#dropAfterGap(gap, (unsent ??= []))
    if (shortened > 0 || unsent !== undefined)
      this.#writtenLate(shortened, unsent ?? [], nowMs - items[0]!.atMs)
    for (const item of items) for (const then of item.then) then(true)
    this.#next()
  }

  /**
   * The write went through, but later than `ledgerMaxWriteMs` after these
   * batches were made, and their leases were counted from then: those sent
   * were shortened by how late they are (`leaveAfter`); those with nothing
   * left were not sent: they stay counted and lapse, and each client's next
   * report renews at once. Not a failed write: a leader stays leader (an
   * overloaded event loop, a mass reconnect, makes writes late, and stepping
   * down would move the load to the next replica).
   */
  #writtenLate(shortened: number, unsent: readonly LeaseBatch[], tookMs: number): void {
    if (unsent.length > 0) {
      this.#host.unsent(unsent)
      this.#host.metrics.errors.inc({ code: 'SLUICE_ERR_LEDGER_WRITE' }, unsent.length)
    }
    this.#host.log.warn(
      { tookMs: Math.round(tookMs), shortened, unsent: unsent.length },
      `ledger write took longer than server.ledgerMaxWriteMs (${this.#host.maxWriteMs()} ms): lease batches sent with their leases shortened by how late they are; those with nothing left not sent (their clients are renewed at their next report)`,
    )
  }

  /**
   * A client's batches go in the order they were made, none after one that did not go: a
   * later batch may carry a family lease that lets its client take its default share of
   * every key not leased on its own, and a lease of 0 of a hot key in the batch that did not
   * go is what keeps it off that key's. Those of `gap`'s clients waiting for the next write
   * (made before the pool heard of the gap: they do not carry what it lost again) go unsent
   * too, into `unsent`; batches made from now on carry again what did not go (`Pool.unsent`).
   */
  #dropAfterGap(gap: ReadonlySet<string>, unsent: LeaseBatch[]): void {
    for (const item of this.#pending) {
      const keep: LeaseBatch[] = []
      for (const batch of item.batches) (gap.has(batch.clientKey) ? unsent : keep).push(batch)
      if (keep.length < item.batches.length) item.batches.splice(0, item.batches.length, ...keep)
    }
  }

  /** A failed write sends nothing: its leases stay counted and lapse. */
  #writeFailed(items: readonly Item[], error: unknown): void {
    const unsent = items.flatMap((i) => i.batches)
    this.#dropAfterGap(new Set(unsent.map((b) => b.clientKey)), unsent)
    this.#host.unsent(unsent)
    this.#host.metrics.errors.inc({ code: 'SLUICE_ERR_LEDGER_WRITE' })
    this.#host.log.error({ err: error }, 'ledger write failed; the leases it covers were not sent')
    for (const item of items) for (const then of item.then) then(false)
    this.#host.failed()
  }

  #next(): void {
    const next = this.#pending.splice(0)
    if (next.length > 0) return this.#write(next)
    for (const resolve of this.#idleWaiters.splice(0)) resolve()
  }
}
