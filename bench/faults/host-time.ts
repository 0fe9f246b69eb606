/**
 * Milliseconds on the host's monotonic clock (CLOCK_MONOTONIC through
 * libuv): one clock for every process on the machine, so the fault suite can
 * merge what separate client processes logged. Benchmarks may read ambient
 * time; the library never does.
 */
export function hostMs(): number {
  return Number(process.hrtime.bigint()) / 1e6
}
