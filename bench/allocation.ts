import { allocate, type Algorithm, type ClientDemand } from '../server/allocation/index.js'
import { random, summarise } from './stats.js'

/**
 * Allocation time for one resource with n clients: skewed demand (log-uniform
 * over six decades), weights 1–10, total demand about ten times capacity so
 * the water level is interior. Includes input validation, as a round does.
 */
export function benchAllocation(sizes: readonly number[], runs: number): string[] {
  const rows: string[] = []
  for (const algorithm of ['fair-share', 'proportional-share'] as Algorithm[]) {
    for (const n of sizes) {
      const next = random(n)
      const clients: ClientDemand[] = []
      let totalWants = 0
      for (let i = 0; i < n; i++) {
        const wants = 10 ** (next() * 6 - 2)
        totalWants += wants
        clients.push({ id: `client-${i}`, wants, weight: 1 + Math.floor(next() * 10) })
      }
      const problem = { capacity: totalWants / 10, algorithm, surplus: 'hold' as const, clients }
      allocate(problem) // warm-up
      const samples: number[] = []
      for (let r = 0; r < runs; r++) {
        const start = performance.now()
        allocate(problem)
        samples.push(performance.now() - start)
      }
      const { median, min, max } = summarise(samples)
      rows.push(
        `| ${algorithm} | ${n.toLocaleString('en-US')} | ${median.toFixed(2)} | ${min.toFixed(2)} | ${max.toFixed(2)} |`,
      )
    }
  }
  return rows
}
