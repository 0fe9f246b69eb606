import { describe, expect, it } from 'vitest'
import type { Ledger, LedgerChange, LedgerEntry } from '../../../server/ledger/index.js'
import { createCoordinator } from '../../../server/index.js'
import { ManualClock } from '../../../shared/index.js'
import { apiAndDbConfig, closedAfterEach, silentLogger } from '../../helpers/coordinator.js'

/**
 * A coordinator that resumes from a ledger writes down at once what the restore learned: every
 * client is away now, so a concurrency lease the ledger had pinned (its client connected then)
 * lapses a lease life from now. Left to the first round's write, a second restart before it
 * found the old pin and counted the lease again from then (found by the pool model in CI,
 * seed -378534295: 1 committed of a capacity cut to 0).
 */

/** A ledger that keeps every change written. */
class RecordingLedger implements Ledger {
  readonly kind = 'recording'
  readonly id = 'recording'
  readonly fresh = false
  readonly synchronous = false
  readonly changes: LedgerChange[] = []

  load(): Promise<LedgerEntry[] | undefined> {
    return Promise.resolve(undefined)
  }

  write(changes: readonly LedgerChange[]): Promise<void> {
    this.changes.push(...changes)
    return Promise.resolve()
  }

  close(): Promise<void> {
    return Promise.resolve()
  }
}

const { running } = closedAfterEach()

describe('a coordinator resuming from a ledger', () => {
  it('writes a pinned concurrency lease as lapsing a lease life from the restart, before any client comes', async () => {
    const clock = new ManualClock()
    const server = await createCoordinator({
      config: apiAndDbConfig(),
      host: '127.0.0.1',
      port: 0,
      clock,
      logger: silentLogger,
      dataDir: false,
    })
    running.push(server)
    const wallMs = clock.wallNow()
    const pinned: LedgerEntry = {
      clientKey: 'a',
      clientId: 'a',
      tenant: undefined,
      instance: undefined,
      resource: 'db',
      pinned: true,
      // Written a while ago, while a was connected: a pinned lease's own end says nothing.
      commitments: [
        { capacity: 4, untilMs: wallMs - 5_000, fallback: 0, fallbackUntilMs: wallMs - 5_000 },
      ],
      writtenMs: wallMs - 6_000,
    }
    const ledger = new RecordingLedger()
    server.coordinator.attachLedger(ledger, [pinned])
    await server.coordinator.ledgerIdle()
    const put = ledger.changes.flatMap((c) =>
      'put' in c && c.put.clientKey === 'a' && c.put.resource === 'db' ? [c.put] : [],
    )
    expect(put).toHaveLength(1)
    expect(put[0]!.pinned).toBe(false)
    // Held a lease life and its grace from the restart (not from the write), then gone.
    expect(put[0]!.commitments[0]!.capacity).toBe(4)
    expect(put[0]!.commitments[0]!.untilMs).toBeGreaterThan(wallMs)
  })
})
