import { benchFamily } from './keyed-family.js'

/**
 * What a keyed family's report costs a process each refresh period: `takeReport` over
 * `keys` keys tracked on the default share, none asked since the last report (most of a
 * gateway's keys, and of the coordinator's own part's, each period). ms per report, median of
 * 5 runs of 100 reports. `node dist/bench/keyed-report.js [keys]`
 */
const keys = Number(process.argv[2] ?? 50_000)
const { family, clock } = benchFamily(100)
for (let k = 0; k < keys; k++) family.tryAcquire(`key-${k}`)
clock.advance(1000)
family.takeReport()
const reports = 100
let sink = 0
function run(): number {
  const t0 = process.hrtime.bigint()
  for (let i = 0; i < reports; i++) {
    clock.advance(1000)
    sink += family.takeReport().length
  }
  return Number(process.hrtime.bigint() - t0) / 1e6 / reports
}
const runs = Array.from({ length: 5 }, run).sort((a, b) => a - b)
console.log(
  `takeReport, ${keys.toLocaleString('en')} keys on the default share: ${runs[2]!.toFixed(3)} ms/report (median of 5)`,
)
if (sink < 0) console.log(sink)
