import { describe, expect, it } from 'vitest'
import { Pool, type LeaseBatch } from '../../../server/pool/index.js'
import { resourceSettings } from '../../helpers/settings.js'

/**
 * Increases wait for the decreases that make room: as acks come, only whole
 * increases go out; what is left waiting is granted in part when the caller
 * says (`grantWaiting`, a debounce later) or at the next round.
 */

function capacities(batches: readonly LeaseBatch[]): Record<string, number> {
  const out: Record<string, number> = {}
  for (const b of batches) for (const l of b.leases) out[b.clientKey] = l.capacity
  return out
}

/** a, b, c at 100 each of 300 (acknowledged); then a wants 300, b and c 50: b and c shrink. */
function shrinking() {
  const settings = resourceSettings({ id: 'api', capacity: 300, burst: 300 })
  const pool = new Pool(0, (id) => (id === 'api' ? settings : undefined))
  const report = (c: string, wants: number, nowMs: number) =>
    pool.reportDemand(c, [{ resource: 'api', wants }], nowMs)
  for (const c of ['a', 'b', 'c']) {
    pool.connect(c, c, undefined, `inst-${c}-0001`, 0)
    report(c, 100, 0)
  }
  for (const b of pool.round('api', 0)) pool.acknowledge(b.clientKey, b.seq, undefined, 0)
  report('a', 300, 10)
  report('b', 50, 10)
  report('c', 50, 10)
  const cuts = pool.round('api', 10)
  expect(capacities(cuts)).toEqual({ b: 50, c: 50 })
  const seq = (c: string) => cuts.find((b) => b.clientKey === c)!.seq
  return { pool, seq }
}

describe('increases as acks come', () => {
  it('sends an increase whole, once enough acks made room for all of it', () => {
    const { pool, seq } = shrinking()
    expect(pool.acknowledge('b', seq('b'), undefined, 20)).toEqual([])
    expect(pool.takeWaiting()).toEqual(['api'])
    expect(pool.takeWaiting()).toEqual([])
    expect(capacities(pool.acknowledge('c', seq('c'), undefined, 21))).toEqual({ a: 200 })
    expect(pool.takeWaiting()).toEqual([])
  })

  it('grants what is waiting in part when told, and the rest whole as the last ack comes', () => {
    const { pool, seq } = shrinking()
    pool.acknowledge('b', seq('b'), undefined, 20)
    expect(capacities(pool.grantWaiting('api', 40))).toEqual({ a: 150 })
    expect(pool.committed('api', 40)).toBe(300)
    expect(capacities(pool.acknowledge('c', seq('c'), undefined, 50))).toEqual({ a: 200 })
  })

  it('marks nothing waiting when nothing is free to grant', () => {
    const { pool } = shrinking()
    expect(pool.grantWaiting('api', 20)).toEqual([])
    expect(pool.takeWaiting()).toEqual([])
  })
})
