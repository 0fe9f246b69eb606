import { createHash } from 'node:crypto'
import { mkdir, open, readFile, rename, rm, type FileHandle } from 'node:fs/promises'
import { join } from 'node:path'
import { SluiceError } from '../../shared/index.js'
import { applyChanges, type Ledger, type LedgerChange, type LedgerEntry } from './types.js'

const fileName = 'ledger.log'
const lockName = 'ledger.lock'

/** Whether a process with this pid is running (signal 0 tests without sending). */
function alive(pid: number): boolean {
  try {
    process.kill(pid, 0)
    return true
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === 'EPERM'
  }
}

function checksum(text: string): string {
  return createHash('sha256').update(text).digest('hex').slice(0, 16)
}

/** One line of the log: a checksum, a space, the JSON of a batch of changes. */
function line(changes: readonly LedgerChange[]): string {
  const json = JSON.stringify(changes)
  return `${checksum(json)} ${json}\n`
}

/**
 * The ledger as a local file: an append-only log, one line per batch of
 * changes (each with a checksum), fsynced before `write` resolves, and
 * compacted into a snapshot (written beside it, fsynced, renamed over it)
 * once it holds four times more lines than live entries. A torn last line
 * (a crash during a write, which then was never acknowledged) is dropped; a
 * bad line anywhere else makes the whole ledger untrusted.
 */
export class FileLedger implements Ledger {
  readonly kind = 'file'
  readonly synchronous = false
  readonly #dir: string
  readonly #path: string
  #handle: FileHandle | undefined
  #state = new Map<string, LedgerEntry>()
  #lines = 0
  #queue: Promise<void> = Promise.resolve()
  #closed = false
  #locked = false
  writes = 0

  constructor(dir: string) {
    this.#dir = dir
    this.#path = join(dir, fileName)
  }

  get path(): string {
    return this.#path
  }

  /**
   * Takes the data directory: one coordinator at a time may write a ledger.
   * A lock left by a process that is gone is taken over; one held by a live
   * process is refused (SLUICE_ERR_LEDGER_LOCKED).
   */
  async #lock(): Promise<void> {
    const path = join(this.#dir, lockName)
    for (let attempt = 0; attempt < 2; attempt++) {
      try {
        const handle = await open(path, 'wx')
        await handle.write(String(process.pid))
        await handle.close()
        this.#locked = true
        return
      } catch (error) {
        if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error
        const pid = Number(await readFile(path, 'utf8').catch(() => ''))
        if (Number.isInteger(pid) && pid > 0 && pid !== process.pid && alive(pid))
          throw new SluiceError(
            'SLUICE_ERR_LEDGER_LOCKED',
            `${this.#dir} is in use by process ${pid}; give each coordinator its own data directory`,
          )
        await rm(path, { force: true })
      }
    }
  }

  async load(): Promise<LedgerEntry[] | undefined> {
    try {
      await mkdir(this.#dir, { recursive: true })
      await this.#lock()
    } catch (error) {
      if (error instanceof SluiceError) throw error
      throw new SluiceError(
        'SLUICE_ERR_LEDGER_DIR',
        `${this.#dir}: ${(error as Error).message}; fix the path or its permissions, or run without a ledger (--data-dir none)`,
        { cause: error },
      )
    }
    let text = ''
    let fresh = false
    try {
      text = await readFile(this.#path, 'utf8')
    } catch (error) {
      // No ledger yet: a first start here, or a data directory that was lost or never copied.
      // Either way nothing says what clients hold: the caller learns.
      if ((error as NodeJS.ErrnoException).code === 'ENOENT') fresh = true
      else
        throw new SluiceError(
          'SLUICE_ERR_LEDGER_CORRUPT',
          `${this.#path}: ${(error as Error).message}`,
          {
            cause: error,
          },
        )
    }
    const state = new Map<string, LedgerEntry>()
    const lines = text.split('\n')
    // The text after the last newline is a line whose write did not finish.
    const complete = lines.slice(0, -1)
    let good = 0
    for (const [i, raw] of complete.entries()) {
      const space = raw.indexOf(' ')
      const json = raw.slice(space + 1)
      if (space !== 16 || checksum(json) !== raw.slice(0, 16)) {
        if (i === complete.length - 1 && lines.at(-1) === '') break // torn last line
        throw new SluiceError(
          'SLUICE_ERR_LEDGER_CORRUPT',
          `${this.#path}: line ${i + 1} fails its checksum`,
        )
      }
      try {
        applyChanges(state, JSON.parse(json) as LedgerChange[])
      } catch (error) {
        throw new SluiceError(
          'SLUICE_ERR_LEDGER_CORRUPT',
          `${this.#path}: line ${i + 1}: ${(error as Error).message}`,
        )
      }
      good++
    }
    this.#state = state
    // Start from a clean file: the state as one snapshot, whatever tail there was.
    await this.#compact()
    this.#lines = good > 0 ? 1 : 0
    return fresh ? undefined : [...state.values()]
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
    await this.#handle?.close()
    this.#handle = undefined
    if (this.#locked) await rm(join(this.#dir, lockName), { force: true })
    this.#locked = false
  }

  async #append(changes: readonly LedgerChange[]): Promise<void> {
    if (changes.length === 0) return
    applyChanges(this.#state, changes)
    const handle = this.#handle ?? (this.#handle = await open(this.#path, 'a'))
    try {
      await handle.write(line(changes))
      await handle.datasync()
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
    this.#lines++
    if (this.#lines > Math.max(64, 4 * this.#state.size)) await this.#compact()
  }

  /** Writes the state as one line beside the log, fsyncs it, and renames it over the log. */
  async #compact(): Promise<void> {
    await this.#handle?.close()
    this.#handle = undefined
    const temp = `${this.#path}.tmp`
    const snapshot = await open(temp, 'w')
    try {
      const puts = [...this.#state.values()].map((put) => ({ put }))
      if (puts.length > 0) await snapshot.write(line(puts))
      await snapshot.datasync()
    } finally {
      await snapshot.close()
    }
    await rename(temp, this.#path)
    // The rename is durable once the directory is.
    const dir = await open(this.#dir, 'r')
    try {
      await dir.sync()
    } finally {
      await dir.close()
    }
    this.#lines = this.#state.size > 0 ? 1 : 0
  }
}
