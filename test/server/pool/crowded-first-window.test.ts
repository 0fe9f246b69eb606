import { describe, expect, it } from 'vitest'
import { CompiledConfig, parseConfig } from '../../../server/config/index.js'
import { Pool, type LeaseBatch } from '../../../server/pool/index.js'

/**
 * A keyed quota's default share is never taken back within its window. With more processes than
 * a crowded family has (server/pool/shapes/default-holders.ts), one that has checked nothing yet
 * holds none of it until its reports say how it checks, even before the coordinator's own part
 * holds the family, while none checked yet or one asks the coordinator: given at once, the first
 * window's default went to the first of 30 gateways starting together, which then asked the
 * coordinator for every check (docs/benchmarks.md).
 */
function family(kind: 'quota' | 'rate', processes: readonly string[]) {
  const config = new CompiledConfig(
    parseConfig({
      resources: [
        kind === 'quota'
          ? { match: 'q/*', keyed: true, kind, capacity: 100, window: '1h', refreshMs: 1000 }
          : { match: 'q/*', keyed: true, kind, capacity: 100, burst: 100, refreshMs: 1000 },
      ],
    }),
  )
  const pool = new Pool(0, (id) => config.settingsFor(id), { learn: false })
  const take = (out: readonly LeaseBatch[], nowMs: number): void => {
    for (const b of out) pool.acknowledge(b.clientKey, b.seq, undefined, nowMs)
  }
  for (const p of processes) pool.connect(p, p, undefined, `${p}-1`, 0)
  /** Each process reports the family: `wants` checks a second, `remote` if it asks the coordinator. */
  const period = (nowMs: number, say: (p: string) => { wants: number; remote?: true }): void => {
    for (const p of processes)
      take(pool.reportDemand(p, [{ resource: 'q/*', ...say(p) }], nowMs).batches, nowMs)
    take(pool.roundMany(pool.familyIds('q/*'), nowMs), nowMs)
  }
  const share = (p: string, nowMs: number): number => pool.committedBy(p, 'q/*', nowMs)
  return { period, share }
}

const eight = ['a', 'b', 'c', 'd', 'e', 'f', 'g', 'h']

describe('a crowded keyed quota’s first window', () => {
  it('gives no default share to a process that has checked nothing yet, then one by traffic to those that check locally', () => {
    const { period, share } = family('quota', eight)
    for (let t = 0; t <= 2000; t += 1000) period(t, () => ({ wants: 0 }))
    for (const p of eight) expect(share(p, 2000), p).toBe(0)
    // `a` and `b` check with tryAcquire alone, `c` asks the coordinator; the others still nothing.
    for (let t = 3000; t <= 5000; t += 1000)
      period(t, (p) =>
        p === 'a' || p === 'b'
          ? { wants: 10 }
          : p === 'c'
            ? { wants: 10, remote: true }
            : { wants: 0 },
      )
    expect(share('a', 5000)).toBeGreaterThan(0)
    expect(share('b', 5000)).toBeGreaterThan(0)
    for (const p of eight.slice(2)) expect(share(p, 5000), p).toBe(0)
  })

  it('goes by traffic to every process, one that has not checked included, once processes check and none asks the coordinator', () => {
    const { period, share } = family('quota', eight)
    period(0, () => ({ wants: 0 }))
    for (const p of eight) expect(share(p, 0), p).toBe(0)
    // `a` checks with tryAcquire (its first refusal asks for an early report); nobody asks remotely.
    for (let t = 1000; t <= 2000; t += 1000)
      period(t, (p) => (p === 'a' ? { wants: 10 } : { wants: 0 }))
    // A joiner (a deploy) is not kept waiting for its first report either.
    for (const p of eight) expect(share(p, 2000), p).toBeGreaterThan(0)
  })

  it('is given at once where the family is not crowded (three processes), and for a rate family', () => {
    const three = family('quota', ['a', 'b', 'c'])
    three.period(0, () => ({ wants: 0 }))
    for (const p of ['a', 'b', 'c']) expect(three.share(p, 0), p).toBeGreaterThan(0)
    const rate = family('rate', eight)
    rate.period(0, () => ({ wants: 0 }))
    expect(eight.filter((p) => rate.share(p, 0) > 0).length).toBeGreaterThan(0)
  })
})
