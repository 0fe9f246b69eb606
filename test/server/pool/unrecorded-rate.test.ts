import { describe, expect, it } from 'vitest'
import { CompiledConfig, parseConfig } from '../../../server/config/index.js'
import { MemoryLedger, type LedgerChange } from '../../../server/ledger/index.js'
import { Pool, centralClientId, type LeaseBatch } from '../../../server/pool/index.js'

/**
 * A crowded keyed rate family's hot key entries that never hold anything (ledger-projection.ts,
 * `unrecorded`): each process deciding remotely gets a lease of 0 of every hot key with its
 * first family lease, and again on each new connection. Written, those were tens of thousands
 * of records rewritten after a coordinator restart (the keyed fault run: 11–25 MB a write).
 */
const config = new CompiledConfig(
  parseConfig({
    resources: [{ match: 'r/*', keyed: true, kind: 'rate', capacity: 20, refreshMs: 1000 }],
  }),
)
const processes = ['p', 'q', 'r', 's', 't', 'u']

function world(pool: Pool) {
  const sent: LeaseBatch[] = []
  const ledger = new MemoryLedger()
  const written: LedgerChange[] = []
  const take = (out: readonly LeaseBatch[], nowMs: number): void => {
    // Write-ahead, as the coordinator does; every batch arrives and is acknowledged.
    const changes = pool.takeChanges((ms) => ms)
    written.push(...changes)
    ledger.write(changes)
    for (const b of out) {
      sent.push(b)
      pool.acknowledge(b.clientKey, b.seq, undefined, nowMs)
    }
  }
  /** Every process asks the family remotely; the central part asks key a (hot at it). */
  const period = (nowMs: number): void => {
    for (const key of ['central', ...processes])
      take(
        pool.reportDemand(
          key,
          [
            { resource: 'r/*', wants: 100, remote: true },
            ...(key === 'central' ? [{ resource: 'r/a', wants: 50 }] : []),
          ],
          nowMs,
        ).batches,
        nowMs,
      )
    take(pool.roundMany(pool.familyIds('r/*'), nowMs), nowMs)
  }
  const connectAll = (nowMs: number, instance: number): void => {
    pool.connect('central', centralClientId, undefined, `central-${instance}`, nowMs)
    for (const p of processes) pool.connect(p, p, undefined, `${p}-1`, nowMs)
  }
  const leasesTo = (key: string, resource: string) =>
    sent
      .filter((b) => b.clientKey === key)
      .flatMap((b) => b.leases.filter((l) => l.resource === resource))
  return { pool, sent, ledger, written, take, period, connectAll, leasesTo }
}

const newPool = () => new Pool(0, (id) => config.settingsFor(id), { track: true, learn: false })
const about = (c: LedgerChange) => ('put' in c ? c.put : c.remove)

describe("a crowded rate family's key entries that never hold anything", () => {
  it('are not written; a restart from that ledger sends each process its 0 of the hot key again', () => {
    const w = world(newPool())
    w.connectAll(0, 1)
    for (let t = 1000; t <= 8000; t += 1000) w.period(t)
    // a is hot at the central part; each process holds 0 of it, by its own lease...
    expect(w.pool.hasResource('r/a')).toBe(true)
    for (const p of processes) expect(w.leasesTo(p, 'r/a').map((l) => l.capacity)).toContain(0)
    // ...of which the ledger heard nothing; the central part's lease of a is written as ever.
    const ofKeyA = w.written.filter((c) => about(c).resource === 'r/a')
    expect(ofKeyA.map((c) => about(c).clientKey)).toContain('central')
    expect(ofKeyA.filter((c) => about(c).clientKey !== 'central')).toEqual([])

    // The coordinator restarts from that ledger; everyone connects again (a new central part).
    const restarted = world(newPool())
    restarted.pool.restore(w.ledger.entries(), (ms) => ms, 8500)
    restarted.take([], 8500)
    restarted.connectAll(8500, 2)
    for (let t = 9500; t <= 14_500; t += 1000) restarted.period(t)
    // Each process's family lease on its new connection carried its 0 of a.
    for (const p of processes) {
      const family = restarted.sent.findIndex(
        (b) => b.clientKey === p && b.leases.some((l) => l.resource === 'r/*'),
      )
      expect(family, p).toBeGreaterThanOrEqual(0)
      expect(restarted.sent[family]!.leases.find((l) => l.resource === 'r/a')?.capacity, p).toBe(0)
    }
    // And a is never leased past its capacity.
    for (let t = 8500; t <= 14_500; t += 500)
      expect(restarted.pool.committed('r/a', t)).toBeLessThanOrEqual(20 + 1e-9)
  })
})
