import fc from 'fast-check'

// Property runs per test: FC_NUM_RUNS (CI sets 1000), default 200 for a quick local loop.
const numRuns = Number(process.env.FC_NUM_RUNS ?? 200)
fc.configureGlobal({ numRuns: Number.isInteger(numRuns) && numRuns > 0 ? numRuns : 200 })
