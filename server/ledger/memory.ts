import { applyChanges, type Ledger, type LedgerChange, type LedgerEntry } from './types.js'

/**
 * A ledger in memory, written synchronously: what the simulator gives its
 * coordinators (it survives their crashes, as a file or etcd would), and the
 * reference the other ledgers are tested against.
 */
export class MemoryLedger implements Ledger {
  readonly kind = 'memory'
  readonly synchronous = true
  readonly id = 'memory'
  readonly fresh = false
  readonly #entries = new Map<string, LedgerEntry>()
  writes = 0

  load(): Promise<LedgerEntry[] | undefined> {
    return Promise.resolve(this.writes === 0 ? undefined : [...this.#entries.values()])
  }

  /** The entries now, synchronously. */
  entries(): LedgerEntry[] {
    return [...this.#entries.values()]
  }

  write(changes: readonly LedgerChange[]): void {
    this.writes++
    applyChanges(this.#entries, changes)
  }

  close(): Promise<void> {
    return Promise.resolve()
  }
}
