import { describe, expect, it } from 'vitest'
import type { Ledger, LedgerChange, LedgerEntry } from '../../../server/ledger/index.js'
import type { ConfigInput } from '../../../server/config/index.js'
import { ManualClock } from '../../../shared/index.js'
import { apiAndDbConfig, closedAfterEach, startCoordinator } from '../../helpers/coordinator.js'

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
  /** Its writer's last sign of life, as a file ledger's `load` finds it. */
  aliveWindowsMs: number | undefined = undefined
  /** What the coordinator said of its windows' clock, each time. */
  readonly alive: number[] = []

  markAlive(windowsMs: number): void {
    this.alive.push(windowsMs)
  }

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

/** A coordinator of `config` on a manual clock, no ledger attached yet. */
async function coordinatorOn(config: ConfigInput) {
  const { server, clock } = await startCoordinator(config, new ManualClock(), 0, { dataDir: false })
  running.push(server)
  return { clock, server }
}

describe('a coordinator resuming from a ledger', () => {
  it('writes a pinned concurrency lease as lapsing a lease life from the restart, before any client comes', async () => {
    const { clock, server } = await coordinatorOn(apiAndDbConfig())
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

describe('a coordinator resuming its quota windows from a ledger', () => {
  /** A coordinator on a manual clock with one quota `q` (100 an hour), no ledger attached yet. */
  const quotaCoordinator = () =>
    coordinatorOn({
      server: { limits: { roundDebounceMs: 0 } },
      resources: [{ match: 'q', kind: 'quota', capacity: 100, window: '1h' }],
    })

  /**
   * Restored from one entry of a quota `q` written `agoMs` before the restart (its writer's
   * windows on its wall clock), saying its writer's writes took `writeLatencyMs`: how far the
   * restored windows trail the wall clock, as the restore's own write says (`windowLagMs`).
   */
  async function lagAfterRestore(
    agoMs: number,
    writeLatencyMs?: number,
    aliveAgoMs?: number,
  ): Promise<number> {
    const { clock, server } = await quotaCoordinator()
    const wallMs = clock.wallNow()
    const entry: LedgerEntry = {
      clientKey: 'a',
      clientId: 'a',
      tenant: undefined,
      instance: undefined,
      resource: 'q',
      pinned: false,
      commitments: [
        { capacity: 10, untilMs: wallMs + 5_000, fallback: 0, fallbackUntilMs: wallMs + 5_000 },
      ],
      writtenMs: wallMs - agoMs,
      ...(writeLatencyMs === undefined ? {} : { writeLatencyMs }),
    }
    const ledger = new RecordingLedger()
    if (aliveAgoMs !== undefined) ledger.aliveWindowsMs = wallMs - aliveAgoMs
    server.coordinator.attachLedger(ledger, [entry])
    await server.coordinator.ledgerIdle()
    const put = ledger.changes.flatMap((c) => ('put' in c && c.put.resource === 'q' ? [c.put] : []))
    expect(put.length).toBeGreaterThan(0)
    return put.at(-1)!.windowLagMs ?? 0
  }

  it('on the wall clock when the time since its writer’s last write is what its slow writes explain', async () => {
    // 3.5 s since the last write: more than a quick restart explains (2 s)...
    expect(await lagAfterRestore(3_500)).toBe(3_500)
    // ...but its writer's writes took 1 s each: its last may have been 2 s stale at its end.
    expect(await lagAfterRestore(3_500, 1_000)).toBe(0)
    // Not beyond that: 5 s since, writes of 1 s, is a step of the wall clock (or a downtime it
    // cannot tell from one): resumed where the writer stood.
    expect(await lagAfterRestore(5_000, 1_000)).toBe(5_000)
  })

  it('on the wall clock when its writer’s last sign of life beside the ledger is recent', async () => {
    // Its last write 5 s ago (a write of a window's edge in flight when it died), its last
    // sign of life 0.4 s ago: resumed from the sign.
    expect(await lagAfterRestore(5_000, 50, 400)).toBe(0)
    // A sign older than the last write says nothing more.
    expect(await lagAfterRestore(5_000, 50, 9_000)).toBe(5_000)
  })

  it('gives its ledger a sign of life every 250 ms: where its quota windows’ clock stands', async () => {
    const { clock, server } = await quotaCoordinator()
    const ledger = new RecordingLedger()
    server.coordinator.attachLedger(ledger, [])
    clock.advance(249)
    expect(ledger.alive).toEqual([])
    clock.advance(1)
    clock.advance(250)
    // No restore behind: the windows' clock is the wall clock.
    expect(ledger.alive).toEqual([clock.wallNow() - 250, clock.wallNow()])
  })
})
