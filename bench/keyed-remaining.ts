import { benchFamily } from './keyed-family.js'

/**
 * What a keyed response's `remaining` costs (docs/http.md, how exact `r` is): the cluster's
 * figure (`clusterRemaining`, the default) against this process's part (`remaining`), a key
 * the process holds a third of. ns per call and bytes allocated per call, median of 5 runs.
 * `node --expose-gc dist/bench/keyed-remaining.js`
 */
const { family, clock } = benchFamily(100)
family.tryAcquire('customer-42')
const n = 2_000_000
let sink = 0
function run(how: 'remaining' | 'clusterRemaining'): { ns: number; bytes: number } {
  globalThis.gc?.()
  const before = process.memoryUsage().heapUsed
  const t0 = process.hrtime.bigint()
  for (let i = 0; i < n; i++) {
    sink +=
      how === 'remaining' ? family.remaining('customer-42') : family.clusterRemaining('customer-42')
    if ((i & 1023) === 0) clock.advance(1)
  }
  const ns = Number(process.hrtime.bigint() - t0) / n
  return { ns, bytes: (process.memoryUsage().heapUsed - before) / n }
}
for (const how of ['remaining', 'clusterRemaining'] as const) {
  const runs = Array.from({ length: 5 }, () => run(how)).sort((a, b) => a.ns - b.ns)
  const mid = runs[2]!
  console.log(
    `${how}: ${mid.ns.toFixed(1)} ns/call, ${mid.bytes.toFixed(2)} B/call allocated (median of 5)`,
  )
}
if (sink < 0) console.log(sink)
