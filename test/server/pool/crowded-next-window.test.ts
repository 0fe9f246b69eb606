import { describe, expect, it } from 'vitest'
import { CompiledConfig, parseConfig } from '../../../server/config/index.js'
import { Pool, centralClientId, type LeaseBatch } from '../../../server/pool/index.js'

/**
 * A keyed quota's default share of the next window goes ahead as the share each holder ends this
 * one with (shapes/keyed-quota-share.ts, `nextBlocks`), but not to a process the coordinator's
 * part decides for (a crowded family's process that asks the coordinator): a share it got before
 * that was known was carried into every next window unused, while the part that decided for it
 * went without (#41: after a coordinator's restart, the keyed quota over 30 gateways).
 */
const config = new CompiledConfig(
  parseConfig({
    resources: [
      { match: 'q/*', keyed: true, kind: 'quota', capacity: 100, window: '10s', refreshMs: 1000 },
    ],
  }),
)
const eight = ['a', 'b', 'c', 'd', 'e', 'f', 'g', 'h']

function family() {
  const pool = new Pool(0, (id) => config.settingsFor(id), { learn: false })
  const sent: LeaseBatch[] = []
  const take = (out: readonly LeaseBatch[], nowMs: number): void => {
    for (const b of out) {
      sent.push(b)
      pool.acknowledge(b.clientKey, b.seq, undefined, nowMs)
    }
  }
  for (const p of eight) pool.connect(p, p, undefined, `${p}-1`, 0)
  /** Each process reports the family; `remote`: it asks the coordinator (and the part asks too). */
  const period = (nowMs: number, remote: boolean): void => {
    for (const p of remote ? ['central', ...eight] : eight)
      take(
        pool.reportDemand(
          p,
          [{ resource: 'q/*', wants: 10, ...(remote ? { remote: true as const } : {}) }],
          nowMs,
        ).batches,
        nowMs,
      )
    take(pool.roundMany(pool.familyIds('q/*'), nowMs), nowMs)
  }
  const share = (p: string, nowMs: number): number => pool.committedBy(p, 'q/*', nowMs)
  /** The block of the next window sent ahead to `p` in `batches` (0: none). */
  const ahead = (batches: readonly LeaseBatch[], p: string): number =>
    batches
      .filter((b) => b.clientKey === p)
      .flatMap((b) => b.leases)
      .find((l) => l.resource === 'q/*')?.window?.next?.capacity ?? 0
  return { pool, take, period, share, ahead }
}

describe('a crowded keyed quota’s next window', () => {
  it('sends no share ahead to a process the coordinator’s part decides for: the part holds its part from the next window', () => {
    const { pool, take, period, share, ahead } = family()
    // The processes check here first: the split goes by traffic, each gets a share.
    for (let t = 0; t <= 2000; t += 1000) period(t, false)
    for (const p of eight) expect(share(p, 2000), p).toBeGreaterThan(0)
    // Then the coordinator's part comes and each process asks it: crowded, decided there. The
    // shares they hold stay theirs to the window's end (never taken back within it).
    pool.connect('central', centralClientId, undefined, 'central-1', 2500)
    for (let t = 3000; t <= 9000; t += 1000) period(t, true)
    for (const p of eight) expect(share(p, 9000), p).toBeGreaterThan(0)
    const batches = pool.renewEdges(['q/*'], 9900)
    take(batches, 9900)
    for (const p of eight) expect(ahead(batches, p), p).toBe(0)
    // From the next window the part holds the processes' part of the family (8 of 9: room is
    // kept for one holder more); the processes, nothing.
    for (let t = 10_000; t <= 12_000; t += 1000) period(t, true)
    for (const p of eight) expect(share(p, 12_000), p).toBe(0)
    expect(share('central', 12_000)).toBeCloseTo(8 / 9, 6)
  })
})
