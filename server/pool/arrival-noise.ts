/**
 * How often a quota block sized by its process's demand may run dry before its next lease
 * comes: at most once in this many blocks, for requests that arrive at random (Poisson) at the
 * estimated rate.
 */
export const blockDryOdds = 0.001

/**
 * From this mean on, the normal tail and a unit (within a unit of the Poisson quantile, never
 * below it): the Poisson sum takes about mean + 3·√mean steps, a round's every holder of every
 * hot key (240 ns at a mean of 90, 55 ns at 2).
 */
const normalFromMean = 10

/** The standard normal quantile of 1 − `blockDryOdds`. */
const zDry = 3.0902

/**
 * Units on top of `mean` that requests arriving at random need, so that their count over a
 * block's time passes mean + this with odds of at most `blockDryOdds`: the Poisson quantile
 * less the mean (0 for a mean of 0; 6 for a mean of 2); from a mean of 10, mean + 3.1·√mean
 * rounded up and a unit, less the mean (11 for 10, 23 for 50: never below the quantile, at most
 * a unit above). A block of the mean alone runs dry about as often as not: a keyed quota's key
 * asked about once a second at each of three gateways, sized 2 a block, was refused at one
 * while 90 of its 100 were unspent (docs/benchmarks.md, "Blocks for requests that come at
 * random"). Pure.
 */
export function arrivalAllowance(mean: number): number {
  if (!(mean > 0)) return 0
  if (mean >= normalFromMean) return Math.ceil(mean + zDry * Math.sqrt(mean)) + 1 - mean
  // The least n with P(N ≤ n) ≥ 1 − blockDryOdds, N ~ Poisson(mean).
  let term = Math.exp(-mean)
  let cdf = term
  let n = 0
  while (cdf < 1 - blockDryOdds) {
    n++
    term *= mean / n
    cdf += term
  }
  return Math.max(0, n - mean)
}
