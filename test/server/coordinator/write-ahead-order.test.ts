import type { Logger } from 'pino'
import { describe, expect, it } from 'vitest'
import { WriteAhead, type WriteAheadHost } from '../../../server/coordinator/write-ahead.js'
import type { Ledger, LedgerChange, LedgerEntry } from '../../../server/ledger/index.js'
import type { CoordinatorMetrics } from '../../../server/observe/index.js'
import type { LeaseBatch } from '../../../server/pool/index.js'
import { ManualClock, type LeaseGrant } from '../../../shared/index.js'

/** A ledger whose writes wait until the test releases them. */
class HeldLedger implements Ledger {
  readonly kind = 'held'
  readonly id = 'held'
  readonly fresh = false
  readonly synchronous = false
  readonly held: (() => void)[] = []
  load(): Promise<LedgerEntry[] | undefined> {
    return Promise.resolve(undefined)
  }
  write(_changes: readonly LedgerChange[]): Promise<void> {
    return new Promise((resolve) => this.held.push(resolve))
  }
  async release(): Promise<void> {
    for (const resolve of this.held.splice(0)) resolve()
    // The write's continuation runs (and delivers) on the next turns.
    for (let i = 0; i < 5; i++) await Promise.resolve()
  }
  close(): Promise<void> {
    return Promise.resolve()
  }
}

const counter = { inc: () => undefined, observe: () => undefined }
const metrics = {
  ledgerWrites: counter,
  ledgerWriteSeconds: counter,
  errors: counter,
} as unknown as CoordinatorMetrics
const log = { warn: () => undefined, error: () => undefined } as unknown as Logger

function batch(clientKey: string, seq: number, ttlMs: number, madeMs: number): LeaseBatch {
  const lease = { resource: `r-${seq}`, capacity: 1, ttlMs } as unknown as LeaseGrant
  return { clientKey, seq, leases: [lease], madeMs }
}

function queue() {
  const clock = new ManualClock()
  const ledger = new HeldLedger()
  const delivered: number[] = []
  const unsent: number[] = []
  const host: WriteAheadHost = {
    takeChanges: () => [{ remove: { clientKey: 'x', resource: 'r' } }],
    deliver: (batches) => delivered.push(...batches.map((b) => b.seq)),
    unsent: (batches) => unsent.push(...batches.map((b) => b.seq)),
    failed: () => undefined,
    maxWriteMs: () => 50,
    metrics,
    log,
  }
  return { clock, ledger, delivered, unsent, wa: new WriteAhead(ledger, clock, host) }
}

describe('the write-ahead queue', () => {
  it('sends no batch of a client after one of its batches that did not go, those made before it heard included', async () => {
    const { clock, ledger, delivered, unsent, wa } = queue()
    // x's batch 1 (a lease of 100 ms) waits for a write that takes 200 ms: nothing left of it.
    wa.enqueue([batch('x', 1, 100, 0)])
    clock.advance(150)
    // Meanwhile x's batch 2 (a family lease of 10 s) and y's batch 3 are made: they wait for
    // the next write.
    wa.enqueue([batch('x', 2, 10_000, 150), batch('y', 3, 10_000, 150)])
    clock.advance(50)
    await ledger.release()
    // Batch 1 did not go, so neither does x's batch 2 (it may carry what 1's leases kept x
    // from); y's goes once its write is done.
    expect(unsent.sort()).toEqual([1, 2])
    expect(delivered).toEqual([])
    await ledger.release()
    expect(delivered).toEqual([3])
    // x's batches made from now on go (the pool carries again what did not go).
    wa.enqueue([batch('x', 4, 10_000, 200)])
    await ledger.release()
    expect(delivered).toEqual([3, 4])
  })

  it("sends a late write's batches in order, shortened, when each has life left", async () => {
    const { clock, ledger, delivered, unsent, wa } = queue()
    wa.enqueue([batch('x', 1, 10_000, 0)])
    wa.enqueue([batch('x', 2, 10_000, 0)])
    clock.advance(200)
    await ledger.release()
    await ledger.release()
    expect(unsent).toEqual([])
    expect(delivered).toEqual([1, 2])
  })
})
