import { benchFamily } from './keyed-family.js'

/**
 * The admit path of `KeyedFamily.decide` (what the HTTP edge calls for a keyed family) against
 * `tryAcquire`: ns per call and bytes allocated per call, a key the process holds a share of,
 * a bucket that never runs dry (the manual clock is moved between calls). Median of 5 runs.
 * `node dist/bench/keyed-decide.js`
 */
const { family, clock } = benchFamily(1e9)
const n = 2_000_000
function run(how: 'decide' | 'tryAcquire'): { ns: number; bytes: number } {
  globalThis.gc?.()
  const before = process.memoryUsage().heapUsed
  const t0 = process.hrtime.bigint()
  for (let i = 0; i < n; i++) {
    if (how === 'decide') void family.decide('customer-42')
    else family.tryAcquire('customer-42')
    if ((i & 1023) === 0) clock.advance(1)
  }
  const ns = Number(process.hrtime.bigint() - t0) / n
  return { ns, bytes: (process.memoryUsage().heapUsed - before) / n }
}
for (const how of ['tryAcquire', 'decide'] as const) {
  const runs = Array.from({ length: 5 }, () => run(how)).sort((a, b) => a.ns - b.ns)
  const mid = runs[2]!
  console.log(
    `${how}: ${mid.ns.toFixed(1)} ns/call, ${mid.bytes.toFixed(2)} B/call allocated (median of 5)`,
  )
}
