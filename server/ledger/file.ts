import { randomBytes } from 'node:crypto'
import {
  mkdir,
  open,
  readFile,
  readdir,
  rename,
  rm,
  writeFile,
  type FileHandle,
} from 'node:fs/promises'
import { join } from 'node:path'
import { SluiceError, systemClock } from '../../shared/index.js'
import { LedgerDamage, encodeHeader, encodeLine, parseLedger } from './file-format.js'
import { lockDirectory, type DirectoryLock } from './file-lock.js'
import { applyChanges, type Ledger, type LedgerChange, type LedgerEntry } from './types.js'

const fileName = 'ledger.log'
const lockName = 'ledger.lock'
/** The writer's last sign of life (`markAlive`): `{"ledger": <id>, "windowsMs": <ms>}`. */
const aliveName = 'ledger.alive'

/** Writes all of `text` at `position`, looping on short writes; a write that makes no progress fails. */
async function writeWhole(handle: FileHandle, text: string, position: number): Promise<void> {
  const buffer = Buffer.from(text)
  let done = 0
  while (done < buffer.length) {
    const { bytesWritten } = await handle.write(buffer, done, buffer.length - done, position + done)
    if (bytesWritten <= 0)
      throw Object.assign(new Error(`no space: wrote ${done} of ${buffer.length} bytes`), {
        code: 'ENOSPC',
      })
    done += bytesWritten
  }
}

/** The time `write` stamps its lines with; injectable for tests. */
export type WallClock = () => number

/**
 * The ledger as a local file (format in file-format.ts): a header that
 * names the ledger and promises how many lines follow, then one checksummed
 * line per write, fdatasynced before `write` resolves, and compacted into a
 * snapshot (written beside it, fdatasynced, read back and checked, renamed
 * over it) once it holds four times more lines than live entries, or four
 * times the bytes of its last snapshot (a write that renews every entry of
 * thousands of hot keys is one line of megabytes: counted in lines, such a
 * file grew by gigabytes before it was compacted).
 *
 * Until `snapshotFrom` it keeps every live entry in memory for its
 * snapshots; after, it takes them from the coordinator's pool and keeps none
 * (about 420 bytes an entry: a hot key per holding process).
 *
 * Every write is whole or it fails: a short write (a full disk, a file-size
 * limit) is continued until done or failed, and a failed one is cut off
 * again, so the file never holds a partial line before a later one. A file
 * that cannot be read whole is corrupt: it is moved aside
 * (`ledger.log.corrupt-<ms>`), a new ledger starts beside it, and `load`
 * throws SLUICE_ERR_LEDGER_CORRUPT, so the coordinator learns.
 */
export class FileLedger implements Ledger {
  readonly kind = 'file'
  readonly synchronous = false
  readonly #dir: string
  readonly #path: string
  readonly #wallNow: WallClock
  #handle: FileHandle | undefined
  /** Every live entry, until `snapshotFrom` gives a source (then empty). */
  #state = new Map<string, LedgerEntry>()
  #source: (() => readonly LedgerEntry[]) | undefined
  /** Entries in the last snapshot (`#compact`). */
  #snapshotEntries = 0
  #id = ''
  #fresh = false
  #lines = 0
  /** Bytes of the file that hold whole lines: where the next write goes. */
  #bytes = 0
  /** Bytes of the last snapshot (`#compact`): what the live entries took then. */
  #snapshotBytes = 0
  /** A failed write could not be cut off: the next write rewrites the file whole first. */
  #broken = false
  #queue: Promise<void> = Promise.resolve()
  #closed = false
  #lock: DirectoryLock | undefined
  writes = 0
  #aliveWindowsMs: number | undefined = undefined
  /** A `markAlive` write in flight (the next waits for it: at most one at a time). */
  #aliveWriting = false

  constructor(dir: string, wallNow: WallClock = () => systemClock.wallNow()) {
    this.#dir = dir
    this.#path = join(dir, fileName)
    this.#wallNow = wallNow
  }

  get path(): string {
    return this.#path
  }

  /** The ledger's identity (32 hex digits), once loaded. */
  get id(): string {
    return this.#id
  }

  /** Whether `load` made this ledger: the data directory held none before. */
  get fresh(): boolean {
    return this.#fresh
  }

  /** Where its writer's quota windows' clock stood at its last sign of life, as `load` found it. */
  get aliveWindowsMs(): number | undefined {
    return this.#aliveWindowsMs
  }

  /**
   * A sign of life: `windowsMs` written to `ledger.alive` beside the ledger, with its id (a
   * sign of another ledger's writer says nothing of this one's). Not synced, one at a time,
   * failures ignored: a restart after a SIGKILL reads the last one the process wrote (the page
   * cache outlives it), and resumes its quota windows from there rather than from the last
   * ledger write, which under load can be seconds older than the death (a write of a window's
   * edge in flight: QuotaWindows.resume).
   */
  markAlive(windowsMs: number): Promise<void> {
    if (this.#closed || this.#aliveWriting || this.#id === '') return Promise.resolve()
    this.#aliveWriting = true
    const text = `${JSON.stringify({ ledger: this.#id, windowsMs: Math.round(windowsMs) })}\n`
    return writeFile(join(this.#dir, aliveName), text)
      .catch(() => undefined)
      .finally(() => {
        this.#aliveWriting = false
      })
  }

  /** The sign of life beside the ledger `id`, if it is that ledger's (undefined otherwise). */
  async #readAlive(id: string): Promise<number | undefined> {
    try {
      const alive = JSON.parse(await readFile(join(this.#dir, aliveName), 'utf8')) as unknown
      if (typeof alive !== 'object' || alive === null) return undefined
      const { ledger, windowsMs } = alive as { ledger?: unknown; windowsMs?: unknown }
      return ledger === id && typeof windowsMs === 'number' && Number.isFinite(windowsMs)
        ? windowsMs
        : undefined
    } catch {
      return undefined
    }
  }

  async #takeDirectory(): Promise<boolean> {
    let existed: boolean
    try {
      const before = await readdir(this.#dir).catch((error: NodeJS.ErrnoException) => {
        if (error.code === 'ENOENT') return undefined
        throw error
      })
      existed = before !== undefined && before.some((name) => name !== lockName)
      await mkdir(this.#dir, { recursive: true })
      this.#lock = await lockDirectory(join(this.#dir, lockName))
    } catch (error) {
      if (error instanceof SluiceError) throw error
      throw new SluiceError(
        'SLUICE_ERR_LEDGER_DIR',
        `${this.#dir}: ${(error as Error).message}; fix the path or its permissions, or run without a ledger (--data-dir none)`,
        { cause: error },
      )
    }
    return existed
  }

  /**
   * What the ledger holds. A data directory that held nothing (no ledger,
   * nothing else) is a first start: a new ledger, nothing outstanding ([]),
   * `fresh`. A directory that holds other files but no ledger lost it:
   * undefined (learn). A damaged file: SLUICE_ERR_LEDGER_CORRUPT, after it
   * was moved aside and a new ledger started.
   */
  async load(): Promise<LedgerEntry[] | undefined> {
    const existed = await this.#takeDirectory()
    let text: string | undefined
    try {
      text = await readFile(this.#path, 'utf8')
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'ENOENT')
        throw new SluiceError(
          'SLUICE_ERR_LEDGER_CORRUPT',
          `${this.#path}: ${(error as Error).message}`,
          {
            cause: error,
          },
        )
    }
    if (text === undefined) {
      await this.#start(new Map())
      this.#fresh = !existed
      return existed ? undefined : []
    }
    let parsed
    try {
      parsed = parseLedger(text)
    } catch (error) {
      if (!(error instanceof LedgerDamage)) throw error
      const aside = `${this.#path}.corrupt-${Math.round(this.#wallNow())}`
      await rename(this.#path, aside)
      await this.#start(new Map())
      throw new SluiceError(
        'SLUICE_ERR_LEDGER_CORRUPT',
        `${this.#path}: ${error.detail}; moved aside to ${aside}, a new ledger started`,
      )
    }
    // Start from a clean file: the state as one snapshot, whatever tail there was.
    this.#id = parsed.id
    this.#aliveWindowsMs = await this.#readAlive(parsed.id)
    this.#state = parsed.entries
    await this.#compact()
    return [...parsed.entries.values()]
  }

  /** A new ledger (a new identity) holding `state`. */
  async #start(state: Map<string, LedgerEntry>): Promise<void> {
    this.#id = randomBytes(16).toString('hex')
    this.#state = state
    await this.#compact()
  }

  snapshotFrom(source: () => readonly LedgerEntry[]): void {
    this.#source = source
    this.#state.clear()
  }

  write(changes: readonly LedgerChange[]): Promise<void> {
    if (this.#closed)
      return Promise.reject(new SluiceError('SLUICE_ERR_LEDGER_WRITE', `${this.#path}: closed`))
    const done = this.#queue.then(() => this.#append(changes))
    this.#queue = done.catch(() => undefined)
    return done
  }

  async close(): Promise<void> {
    this.#closed = true
    await this.#queue
    // The header written after the last write's sync is made durable now.
    await this.#handle?.datasync().catch(() => undefined)
    await this.#handle?.close()
    this.#handle = undefined
    await this.#lock?.release()
    this.#lock = undefined
  }

  async #append(changes: readonly LedgerChange[]): Promise<void> {
    if (changes.length === 0) return
    if (this.#source === undefined) applyChanges(this.#state, changes)
    try {
      // A write that failed and could not be cut off: write the whole state anew (what this
      // write adds included), or fail again.
      if (this.#broken) return await this.#compact()
      const handle = this.#handle ?? (this.#handle = await open(this.#path, 'r+'))
      const n = this.#lines + 1
      const line = encodeLine(n, this.#wallNow(), changes)
      try {
        await writeWhole(handle, line, this.#bytes)
        await handle.datasync()
      } catch (error) {
        await this.#cutBack(handle)
        throw error
      }
      this.#bytes += Buffer.byteLength(line)
      this.#lines = n
      // The header's promise follows the data (made durable by the next sync): a file cut short
      // below it is refused at load.
      await writeWhole(handle, encodeHeader(this.#id, n), 0)
    } catch (error) {
      throw new SluiceError(
        'SLUICE_ERR_LEDGER_WRITE',
        `${this.#path}: ${(error as Error).message}`,
        {
          cause: error,
        },
      )
    }
    this.writes++
    if (this.#lines > Math.max(64, 4 * this.#snapshotEntries) || this.#bytes > this.#compactAtBytes)
      // A compaction that fails (no space for the copy) leaves the log as it was.
      await this.#compact().catch(() => undefined)
  }

  /**
   * The file's size past which it is compacted: four times its last snapshot, so that at least
   * three snapshots' worth of writes come between two compactions, with a floor of 1 MiB (a
   * small ledger is compacted by its count of lines).
   */
  get #compactAtBytes(): number {
    return Math.max(1 << 20, 4 * this.#snapshotBytes)
  }

  /** After a failed write: cut the file back to its whole lines, or mark it broken. */
  async #cutBack(handle: FileHandle): Promise<void> {
    try {
      await handle.truncate(this.#bytes)
      await handle.datasync()
    } catch {
      this.#broken = true
    }
  }

  /**
   * Writes the state as one snapshot beside the log, syncs it, reads it back
   * whole, and renames it over the log (then syncs the directory, which makes
   * the rename durable). Any failure leaves the log as it was.
   */
  async #compact(): Promise<void> {
    const temp = `${this.#path}.tmp`
    const puts = (this.#source?.() ?? [...this.#state.values()]).map((put) => ({ put }))
    const lines = puts.length > 0 ? 1 : 0
    const text =
      encodeHeader(this.#id, lines) + (lines > 0 ? encodeLine(1, this.#wallNow(), puts) : '')
    try {
      const snapshot = await open(temp, 'w')
      try {
        await writeWhole(snapshot, text, 0)
        await snapshot.datasync()
      } finally {
        await snapshot.close()
      }
      const back = parseLedger(await readFile(temp, 'utf8'))
      if (back.lines !== lines || back.entries.size !== puts.length || back.tornBytes > 0)
        throw new Error('the snapshot read back differs from what was written')
      await this.#handle?.close()
      this.#handle = undefined
      await rename(temp, this.#path)
      const dir = await open(this.#dir, 'r')
      try {
        await dir.sync()
      } finally {
        await dir.close()
      }
    } catch (error) {
      await rm(temp, { force: true }).catch(() => undefined)
      throw error instanceof SluiceError
        ? error
        : new SluiceError(
            'SLUICE_ERR_LEDGER_WRITE',
            `${this.#path}: compaction: ${(error as Error).message}`,
            {
              cause: error,
            },
          )
    }
    this.#lines = lines
    this.#bytes = Buffer.byteLength(text)
    this.#snapshotBytes = this.#bytes
    this.#snapshotEntries = puts.length
    this.#broken = false
  }
}
