/**
 * The worst interval of unit admissions at times `admittedMs` (in order): the most that any
 * interval [i, j] admitted beyond rate·(t_j − t_i), to compare with the burst (a bucket of
 * `ratePerSec` and that burst admits no more). One pass: j − i + 1 ≤ rate·(t_j − t_i) + burst
 * is f(j) − f(i) + 1 ≤ burst with f(k) = k − rate·t_k, so keep the least f so far.
 */
export function worstInterval(admittedMs: readonly number[], ratePerSec: number): number {
  let least = Infinity
  let worst = -Infinity
  for (let k = 0; k < admittedMs.length; k++) {
    const f = k - (ratePerSec * admittedMs[k]!) / 1000
    least = Math.min(least, f)
    worst = Math.max(worst, f - least + 1)
  }
  return worst
}
