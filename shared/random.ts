/**
 * A small, fast, seeded PRNG (mulberry32): uniform in [0, 1). The same seed
 * gives the same sequence on every machine, so simulations and benchmarks
 * are reproducible.
 */
export function seededRandom(seed: number): () => number {
  let a = seed >>> 0
  return () => {
    a = (a + 0x6d2b79f5) >>> 0
    let t = a
    t = Math.imul(t ^ (t >>> 15), t | 1)
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61)
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296
  }
}

/**
 * Zipf(s) over `n` ranks (0 the most drawn) by inverse transform over the
 * cumulative weights: keyed workloads in the simulator and the benchmarks.
 */
export function zipf(n: number, s: number, random: () => number): () => number {
  const cdf = new Float64Array(n)
  let total = 0
  for (let i = 0; i < n; i++) cdf[i] = total += 1 / (i + 1) ** s
  return () => {
    const u = random() * total
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
