import type { Etcd3 } from 'etcd3'
import { SluiceError } from '../../shared/index.js'
import { entryKey, type Ledger, type LedgerChange, type LedgerEntry } from '../ledger/index.js'

/** The election key of the leader writing, and the revision that created it. */
export interface Fence {
  readonly key: string
  readonly createRevision: string
}

/** etcd refuses transactions with more operations than this (its --max-txn-ops default). */
const maxOpsPerTxn = 100

/**
 * The ledger on etcd, for replicas: one key per entry under
 * `ledger/<name>/`. Every write is a transaction that first checks that the
 * writer's election key still exists with the revision that created it, so a
 * deposed leader's write fails (fencing) and a new leader reads exactly what
 * was out. A marker key says the ledger has been in use, so a cluster's very
 * first leader learns once.
 */
export class EtcdLedger implements Ledger {
  readonly kind = 'etcd'
  readonly synchronous = false
  readonly fresh = false
  readonly id: string
  readonly #client: Etcd3
  readonly #prefix: string
  readonly #fence: () => Fence | undefined
  #queue: Promise<void> = Promise.resolve()

  constructor(client: Etcd3, name: string, fence: () => Fence | undefined) {
    this.#client = client
    this.#prefix = `ledger/${name}/`
    this.id = `etcd:${name}`
    this.#fence = fence
  }

  #key(clientKey: string, resource: string): string {
    return `${this.#prefix}e/${Buffer.from(entryKey(clientKey, resource)).toString('base64url')}`
  }

  async load(): Promise<LedgerEntry[] | undefined> {
    try {
      const marker = await this.#client.get(`${this.#prefix}in-use`).string()
      const values = await this.#client.getAll().prefix(`${this.#prefix}e/`).strings()
      if (marker === null) return undefined
      return Object.values(values).map((v) => JSON.parse(v) as LedgerEntry)
    } catch (error) {
      throw new SluiceError(
        'SLUICE_ERR_LEDGER_CORRUPT',
        `etcd ${this.#prefix}: ${(error as Error).message}`,
        {
          cause: error,
        },
      )
    }
  }

  write(changes: readonly LedgerChange[]): Promise<void> {
    const done = this.#queue.then(() => this.#commit(changes))
    this.#queue = done.catch(() => undefined)
    return done
  }

  async #commit(changes: readonly LedgerChange[]): Promise<void> {
    const fence = this.#fence()
    if (fence === undefined)
      throw new SluiceError(
        'SLUICE_ERR_LEDGER_WRITE',
        'this replica does not lead: nothing written',
      )
    // etcd refuses a transaction that names a key twice: the last change of each entry wins.
    const last = new Map<string, LedgerChange>()
    for (const c of changes) {
      const e = 'put' in c ? c.put : c.remove
      last.set(entryKey(e.clientKey, e.resource), c)
    }
    const ops = [
      this.#client.put(`${this.#prefix}in-use`).value('1'),
      ...[...last.values()].map((c) =>
        'put' in c
          ? this.#client
              .put(this.#key(c.put.clientKey, c.put.resource))
              .value(JSON.stringify(c.put))
          : this.#client.delete().key(this.#key(c.remove.clientKey, c.remove.resource)),
      ),
    ]
    for (let i = 0; i < ops.length; i += maxOpsPerTxn) {
      const result = await this.#client
        .if(fence.key, 'Create', '==', fence.createRevision)
        .then(...ops.slice(i, i + maxOpsPerTxn))
        .commit()
      if (!result.succeeded)
        throw new SluiceError(
          'SLUICE_ERR_LEDGER_WRITE',
          'fenced: this replica no longer holds its election key, so it may not lead',
        )
    }
  }

  async close(): Promise<void> {
    await this.#queue
  }
}
