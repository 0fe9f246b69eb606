/**
 * One commitment as the ledger keeps it: what a client may enforce of a
 * resource, in wall-clock ms (the ledger outlives the process whose
 * monotonic clock the pool runs on).
 */
export interface LedgerCommitment {
  readonly capacity: number
  readonly untilMs: number
  readonly fallback: number
  readonly fallbackUntilMs: number
  /**
   * The lease lapsed while its client was away (absent: it did not): it counts as its fallback
   * until `fallbackUntilMs` and no more, whatever happens to the client after a restart.
   */
  readonly lapsed?: true | undefined
}

/** What one client is committed of one resource: every lease that still counts. */
export interface LedgerEntry {
  /** The pool's key of the client (its id, scoped by tenant). */
  readonly clientKey: string
  readonly clientId: string
  readonly tenant: string | undefined
  /** The client process's nonce, so that process can resume its leases after a restart. */
  readonly instance: string | undefined
  readonly resource: string
  /** Concurrency: the slots counted while the client was connected never lapse by time. */
  readonly pinned: boolean
  readonly commitments: readonly LedgerCommitment[]
  /**
   * The wall time this entry was written. A restore holds each commitment at
   * least `untilMs − writtenMs` from the restart, so a wall clock stepped
   * ahead between write and restart cannot shorten it.
   */
  readonly writtenMs?: number | undefined
  /**
   * The writing process's monotonic clock at the write, and that process's
   * epoch (a random id per process): within one epoch, how long before its
   * last write an entry was written is exact, whatever the wall clock did.
   */
  readonly writtenMono?: number | undefined
  readonly epoch?: string | undefined
  /**
   * How far the writer's wall clock was ahead of its quota windows' clock at the write, ms
   * (absent: they agreed): a restart resumes the windows where the writer's stood
   * (`writtenMs − windowLagMs`), not where its own wall clock says.
   */
  readonly windowLagMs?: number | undefined
  /**
   * How long the writer's ledger writes were taking when this was written, ms (the slowest
   * of the last 10 s, from the taking of a write's changes to its being durable, the one in
   * flight counted so far; absent: none took 1 ms): its last write may be up to about twice
   * that older than its end, time a restart counts as downtime, not as a step of the wall
   * clock (QuotaWindows.resume).
   */
  readonly writeLatencyMs?: number | undefined
  /**
   * A quota's: what the client had reported used of window `window` when the entry was
   * written (every block is written before it is sent, so with what was used as of then).
   */
  readonly used?:
    | {
        readonly window: number
        readonly units: number
        /** A keyed quota's key: of `units`, those handed on to it as spent by others. */
        readonly charged?: number
      }
    | undefined
  /**
   * A quota's: the window its newest lease was of. A restore takes the lease as of that window
   * (not of the one the wall clock says now), and holds that window until it has surely ended
   * on the writer's clock (docs/operations.md, "Quota windows and clock steps").
   */
  readonly leaseWindow?: number | undefined
  /**
   * Keyed quota share: a share handed on to this holder, and the keys it must count spent
   * with it, not yet acknowledged (server/pool/handover.ts): every lease carries them until
   * one is, after a restart too.
   */
  /**
   * A named quota's: the client's block of the next window, sent ahead of its start
   * (server/pool/ahead.ts). A restore counts it as the block was counted: against both windows
   * until `untilMs`, a lease of its window once that is in force.
   */
  readonly ahead?: {
    readonly window: number
    readonly capacity: number
    /** When the window opens and ends, and until when the block counts (wall-clock ms). */
    readonly startMs: number
    readonly endMs: number
    readonly untilMs: number
  }
  /**
   * Keyed quota share of the coordinator's own part: of each key, per window, at least what it
   * answered admitted (written before the answers; server/pool/central-spend.ts). A new part
   * that takes over hands the share on less these units. Absent: the writer did not reserve
   * (its share stays spent to the window's end).
   */
  readonly reserved?: readonly {
    readonly window: number
    readonly keys: readonly (readonly [string, number])[]
  }[]
  /**
   * The share's reservations are in entries of their own, a shard of a window's keys each
   * (server/pool/central-spend.ts, `reserveShardId`): `reserved` on such an entry holds them.
   */
  readonly reservedIn?: 'shards' | undefined
  /** Windows it admitted more keys of than a release may say: not vouched for (spent to their end). */
  readonly reservedFull?: readonly number[] | undefined
  /** Keyed quota share: the window it was last handed a leaver's share in (handover.ts). */
  readonly inheritedWindow?: number | undefined
  readonly inherit?: {
    readonly window: number
    readonly keys: readonly [string, number][]
    /** The handover's id: a client counts each once (handover.ts). */
    readonly id?: string
  }
}

/** What every entry of one write carries of it (`LedgerEntry.writtenMs`, `writtenMono`, `epoch`, `windowLagMs`, `writeLatencyMs`). */
export interface LedgerStamp {
  readonly writtenMs?: number
  readonly writtenMono?: number
  readonly epoch?: string
  readonly windowLagMs?: number
  readonly writeLatencyMs?: number
}

/** A change to the ledger: an entry's new state, or its removal. */
export type LedgerChange =
  | { readonly put: LedgerEntry }
  | { readonly remove: { readonly clientKey: string; readonly resource: string } }

/** The key of an entry in a ledger. */
export function entryKey(clientKey: string, resource: string): string {
  return JSON.stringify([clientKey, resource])
}

/**
 * Where the coordinator writes down what it has out before it hands it out,
 * so a coordinator that starts or takes over resumes from it instead of
 * learning. `write` is durable when it resolves (or returns, for a ledger
 * that is synchronous): only then are the leases it covers sent.
 */
export interface Ledger {
  /**
   * What was written, entry by entry; undefined when nothing ever was (a
   * first start, or a lost store: either way, learn); throws
   * SLUICE_ERR_LEDGER_CORRUPT when it cannot be trusted.
   */
  load(): Promise<LedgerEntry[] | undefined>
  write(changes: readonly LedgerChange[]): Promise<void> | void
  /**
   * For a ledger that compacts (a file): from now on its snapshots are
   * `source()`, every entry as the coordinator's pool holds it, instead of a
   * copy it keeps of every entry written (a family's hot keys are entries by
   * the ten thousand). `source()` holds at least what was written, and what
   * is not yet written is newer (see `Pool.ledgerEntries`).
   */
  snapshotFrom?(source: () => readonly LedgerEntry[]): void
  close(): Promise<void>
  /** For status: `file`, `etcd`, `memory`. */
  readonly kind: string
  /** `write` returns at once, done (nothing waits on I/O): batches go out in the same turn. */
  readonly synchronous: boolean
  /**
   * The ledger's identity, once loaded: a welcome names it, so a client
   * holding a lease from another ledger (a lost data directory) is noticed.
   */
  readonly id: string
  /** `load` found no earlier ledger and made this one: nothing can be outstanding. */
  readonly fresh: boolean
  /**
   * A sign of life of the writer, as often as it likes (the coordinator: every
   * `aliveEveryMs`): where its quota windows' clock stands. Kept beside the ledger and
   * not made durable: it outlives its writer's death (a SIGKILL), not its machine's.
   * Optional: a file ledger keeps one.
   */
  markAlive?(windowsMs: number): Promise<void> | void
  /** Its writer's last `markAlive` as `load` found it (this ledger's, none other's). */
  readonly aliveWindowsMs?: number | undefined
}

/**
 * The monotonic time until which a restored commitment holds: at least its
 * whole remaining life as of the write (`untilMs − writtenMs`) counted from
 * the restart, and longer when the wall clock says so. The wall clock alone
 * is not trusted: stepped ahead across a restart, it would end leases that
 * clients still enforce.
 */
export function restoredUntilMs(
  untilWallMs: number,
  writtenWallMs: number | undefined,
  nowWallMs: number,
  nowMonoMs: number,
  /** How long the writer went on writing after this entry (its epoch's last write, on its monotonic clock). */
  writtenBeforeLastMs = 0,
): number {
  const byWall = untilWallMs - nowWallMs
  const byWrite =
    writtenWallMs === undefined ? byWall : untilWallMs - writtenWallMs - writtenBeforeLastMs
  return nowMonoMs + Math.max(byWall, byWrite)
}

/**
 * For each entry, how long its writer went on writing after it: its epoch's
 * last write minus its own, on the writer's monotonic clock (0 when unknown).
 * The crash came after that last write, so what an entry had left then is
 * at least what it had left at the crash.
 */
export function writtenBeforeLast(entries: readonly LedgerEntry[]): (e: LedgerEntry) => number {
  const last = new Map<string, number>()
  for (const e of entries)
    if (e.epoch !== undefined && e.writtenMono !== undefined)
      last.set(e.epoch, Math.max(last.get(e.epoch) ?? -Infinity, e.writtenMono))
  return (e) =>
    e.epoch === undefined || e.writtenMono === undefined
      ? 0
      : Math.max(0, last.get(e.epoch)! - e.writtenMono)
}

/**
 * Each restored commitment's end on this process's clock (`restoredUntilMs`):
 * at least what it had left at its writer's last write (exact on the
 * writer's monotonic clock), so a wall clock stepped either way cannot
 * shorten it, and a lease that had run out by the crash is not brought back.
 */
export function restoredUntilFor(
  entries: readonly LedgerEntry[],
  nowWallMs: number,
  nowMonoMs: number,
): (untilWallMs: number, e: LedgerEntry) => number {
  const before = writtenBeforeLast(entries)
  return (untilWallMs, e) =>
    restoredUntilMs(untilWallMs, e.writtenMs, nowWallMs, nowMonoMs, before(e))
}

/** Applies changes to a map of entries (the reference every ledger must agree with). */
export function applyChanges(
  state: Map<string, LedgerEntry>,
  changes: readonly LedgerChange[],
): void {
  for (const c of changes) {
    if ('put' in c) state.set(entryKey(c.put.clientKey, c.put.resource), c.put)
    else state.delete(entryKey(c.remove.clientKey, c.remove.resource))
  }
}
