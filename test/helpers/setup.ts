import fc from 'fast-check'

// Property runs per test: FC_NUM_RUNS (CI sets 1000), default 200 for a quick local loop.
const numRuns = Number(process.env.FC_NUM_RUNS ?? 200)
fc.configureGlobal({
  numRuns: Number.isInteger(numRuns) && numRuns > 0 ? numRuns : 200,
  // An array given a maxLength is generated up to it. fast-check 4's default size ('small')
  // keeps every array to about 10 elements whatever its maxLength says, so a property written
  // for 200 steps ran 10 at most: BurstSlack's property passed a hand-back that long runs
  // broke. Arrays with no maxLength stay small.
  defaultSizeToMaxWhenMaxSpecified: true,
  // A counterexample again: FC_SEED and FC_PATH as fast-check printed them (run the one test,
  // `-t`, at the FC_NUM_RUNS that found it). FC_SHRINK=1 with FC_PATH the run's index alone
  // (the path's first number) shrinks it again instead of stopping at it.
  ...(process.env.FC_SEED === undefined
    ? {}
    : {
        seed: Number(process.env.FC_SEED),
        ...(process.env.FC_PATH === undefined ? {} : { path: process.env.FC_PATH }),
        endOnFailure: process.env.FC_SHRINK === undefined,
      }),
})
