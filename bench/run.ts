import { cpus } from 'node:os'
import { benchAllocation } from './allocation.js'

// `npm run bench`: runs every benchmark and prints markdown rows for docs/benchmarks.md.
const only = process.argv[2]
const runs = Number(process.env.BENCH_RUNS ?? 7)

console.log(
  `machine: ${cpus().length} × ${cpus()[0]?.model ?? 'unknown CPU'}, Node ${process.version}`,
)
if (only === undefined || only === 'allocation') {
  console.log('\n## allocation (ms per allocate() call, median of runs, min, max)\n')
  console.log('| algorithm | clients | median ms | min ms | max ms |')
  console.log('| --- | --- | --- | --- | --- |')
  for (const row of benchAllocation([1_000, 10_000, 100_000, 1_000_000], runs)) console.log(row)
}
