/** Draws for keyed workloads: a seeded uniform generator and Zipf(s) over ranks. */

/** A deterministic generator (mulberry32): the same draws for the same seed. */
export function seededUniform(seed: number): () => number {
  let a = seed >>> 0
  return () => {
    a = (a + 0x6d2b79f5) >>> 0
    let t = a
    t = Math.imul(t ^ (t >>> 15), t | 1)
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61)
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296
  }
}

/** Zipf(s) over n ranks by inverse transform over the cumulative weights. */
export function zipf(n: number, s: number, rand: () => number): () => number {
  const cdf = new Float64Array(n)
  let total = 0
  for (let i = 0; i < n; i++) cdf[i] = total += 1 / (i + 1) ** s
  return () => {
    const u = rand() * total
    let lo = 0
    let hi = n - 1
    while (lo < hi) {
      const mid = (lo + hi) >>> 1
      if (cdf[mid]! < u) lo = mid + 1
      else hi = mid
    }
    return lo
  }
}
