import { describe, expect, it } from 'vitest'
import { seededRandom, zipf } from '../../shared/index.js'

describe('seeded draws', () => {
  it('repeat for a seed, and differ between seeds', () => {
    const a = seededRandom(7)
    const b = seededRandom(7)
    const c = seededRandom(8)
    const first = Array.from({ length: 5 }, a)
    expect(Array.from({ length: 5 }, b)).toEqual(first)
    expect(Array.from({ length: 5 }, c)).not.toEqual(first)
    for (const x of first) expect(x >= 0 && x < 1).toBe(true)
  })

  it('draw Zipf(s) ranks: rank r about (r+1)^-s as often as rank 0', () => {
    const n = 1000
    const draw = zipf(n, 1.1, seededRandom(1))
    const counts = new Uint32Array(n)
    for (let i = 0; i < 200_000; i++) counts[draw()]!++
    expect(counts[1]! / counts[0]!).toBeCloseTo(2 ** -1.1, 1)
    expect(counts[9]! / counts[0]!).toBeCloseTo(10 ** -1.1, 1)
    expect(Math.max(...counts)).toBe(counts[0])
  })
})
