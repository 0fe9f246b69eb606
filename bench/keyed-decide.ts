import { KeyedFamily } from '../client/keyed/index.js'
import { resolveKeyedOptions } from '../client/options.js'
import { ManualClock } from '../shared/index.js'

/**
 * The admit path of `KeyedFamily.decide` (what the HTTP edge calls for a keyed family) against
 * `tryAcquire`: ns per call and bytes allocated per call, a key the process holds a share of,
 * a bucket that never runs dry (the manual clock is moved between calls). Median of 5 runs.
 * `node dist/bench/keyed-decide.js`
 */
const owner = {
  requestEarlyReport: () => undefined,
  drained: () => undefined,
  askRemote: () => Promise.resolve({ admitted: false, retryAfterMs: 0 }),
}
const clock = new ManualClock()
const family = new KeyedFamily('k', resolveKeyedOptions('k', {}), clock, clock, owner)
family.applyFamilyLease({
  resource: 'k/*',
  kind: 'rate',
  capacity: 1 / 3,
  burst: 1 / 3,
  ttlMs: 1e12,
  refreshMs: 1000,
  safeCapacity: 1 / 3,
  safeHoldMs: 1000,
  family: { kind: 'rate', capacity: 1e9, burst: 1e9 },
})
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
