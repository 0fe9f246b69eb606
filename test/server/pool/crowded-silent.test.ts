import { describe, expect, it } from 'vitest'
import { CompiledConfig, parseConfig } from '../../../server/config/index.js'
import { Pool, centralClientId, type LeaseBatch } from '../../../server/pool/index.js'

/**
 * A crowded family whose processes are slow to acknowledge: a process that left its share's
 * fall unacknowledged for a refresh period sits out the family's rounds (its share counted
 * apart, rounds.ts), but it is still one of the family's processes. Counted out of the crowd
 * as well, the family flipped to "not crowded" and back at every round while acks were late
 * (a restarted coordinator under 8 deciding processes: each flip moved every key's share,
 * thousands of leases a second, the ledger writes and acks fell further behind, and the hot
 * keys stayed at 20-70% of their due for the rest of the run in about one run in two under load;
 * #41).
 */
function world() {
  const config = new CompiledConfig(
    parseConfig({
      resources: [{ match: 'key/*', keyed: true, kind: 'rate', capacity: 10, refreshMs: 1000 }],
    }),
  )
  const pool = new Pool(0, (id) => config.settingsFor(id), { learn: false })
  /** Clients whose acks are held back (stalled, or stuck behind a write), and their batches. */
  const deaf = new Set<string>()
  const held: LeaseBatch[] = []
  const take = (out: readonly LeaseBatch[], nowMs: number): void => {
    for (const b of out)
      if (deaf.has(b.clientKey)) held.push(b)
      else pool.acknowledge(b.clientKey, b.seq, undefined, nowMs)
  }
  /** The held acks arrive, in order. */
  const hear = (nowMs: number): void => {
    deaf.clear()
    take(held.splice(0), nowMs)
  }
  const report = (key: string, remote: boolean, nowMs: number): void =>
    take(pool.reportDemand(key, [{ resource: 'key/*', wants: 100, remote }], nowMs).batches, nowMs)
  const round = (nowMs: number): void => take(pool.roundMany(['key/*'], nowMs), nowMs)
  return { pool, deaf, hear, report, round }
}

describe('a crowded family whose processes are slow to acknowledge', () => {
  it('stays crowded while some of its processes sit out a round: nobody is given a default share back', () => {
    const { pool, deaf, hear, report, round } = world()
    const processes = ['p', 'q', 'r', 's', 't', 'u', 'v', 'w']
    for (const p of processes) pool.connect(p, p, undefined, `${p}-1`, 0)
    // First each process decides locally on its default share.
    for (let t = 1000; t <= 3000; t += 1000) {
      for (const p of processes) report(p, false, t)
      round(t)
    }
    for (const p of processes) expect(pool.committedBy(p, 'key/*', 3000)).toBeGreaterThan(0)

    // Then they ask the coordinator (a crowded family: its part decides for them), but six of
    // the eight do not acknowledge their shares' falls.
    for (const p of processes.slice(2)) deaf.add(p)
    pool.connect('central', centralClientId, undefined, 'central-1', 3100)
    let t = 3200
    for (; t <= 9000; t += 200) {
      report('central', false, t)
      for (const p of processes) report(p, true, t)
      round(t)
      // The two that acknowledge hold nothing of the family's default share at any round: the
      // coordinator's part decides for them (a flip would give each a fifth of every key).
      for (const p of processes.slice(0, 2))
        expect(pool.committedBy(p, 'key/*', t), `${p} at ${t} ms`).toBe(0)
    }
    // The others' acks arrive at last: every process holds nothing, the part the whole.
    hear(t)
    for (; t <= 11_000; t += 200) {
      report('central', false, t)
      for (const p of processes) report(p, true, t)
      round(t)
    }
    for (const p of processes) expect(pool.committedBy(p, 'key/*', t), p).toBe(0)
    expect(pool.committedBy('central', 'key/*', t)).toBeCloseTo(1, 9)
  })
})
