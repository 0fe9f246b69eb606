/**
 * The simulator's measures, as pure functions of recorded series, so each
 * can be tested against a hand-worked example.
 */

/** Jain's fairness index of `xs`: (Σx)² / (n·Σx²), 1 when all are equal; 1 for an empty list. */
export function jain(xs: readonly number[]): number {
  let sum = 0
  let squares = 0
  for (const x of xs) {
    sum += x
    squares += x * x
  }
  if (xs.length === 0 || squares === 0) return 1
  return (sum * sum) / (xs.length * squares)
}

/**
 * Worst admitted ÷ capacity over any window of `windowTicks` consecutive
 * ticks (capacity summed over the same ticks). 0 when capacity is 0 throughout.
 */
export function worstWindowRatio(
  admitted: readonly number[],
  capacity: readonly number[],
  windowTicks: number,
  include: (tick: number) => boolean = () => true,
): number {
  let a = 0
  let c = 0
  let worst = 0
  for (let i = 0; i < admitted.length; i++) {
    a += admitted[i]!
    c += capacity[i]!
    if (i >= windowTicks) {
      a -= admitted[i - windowTicks]!
      c -= capacity[i - windowTicks]!
    }
    if (i >= windowTicks - 1 && c > 0 && include(i - windowTicks + 1) && include(i))
      worst = Math.max(worst, a / c)
  }
  return worst
}

/**
 * The most admitted beyond `∫capacity dt + burst` over any interval of ticks
 * (`capacity` in tokens per tick): ≤ 0 means the token-bucket bound held.
 * Intervals that touch a tick `include` rejects are skipped (the running
 * minimum restarts after them).
 */
export function worstExcessOverBound(
  admitted: readonly number[],
  capacity: readonly number[],
  burst: number,
  include: (tick: number) => boolean = () => true,
): number {
  // max over t1 ≤ t2 of (A(t2) − C(t2)) − (A(t1−1) − C(t1−1)) − burst, with prefix sums A, C.
  let prefix = 0
  let lowest = 0
  let worst = -burst
  for (let i = 0; i < admitted.length; i++) {
    if (!include(i)) {
      prefix += admitted[i]! - capacity[i]!
      lowest = prefix
      continue
    }
    prefix += admitted[i]! - capacity[i]!
    worst = Math.max(worst, prefix - lowest - burst)
    lowest = Math.min(lowest, prefix)
  }
  return worst
}

/** Runs of consecutive samples whose ratio exceeds `threshold`: how many, and the highest ratio. */
export function episodes(
  ratios: readonly number[],
  threshold: number,
): { count: number; peak: number } {
  let count = 0
  let peak = 0
  let inside = false
  for (const r of ratios) {
    if (r > threshold) {
      if (!inside) count++
      inside = true
      peak = Math.max(peak, r)
    } else inside = false
  }
  return { count, peak }
}

/**
 * Time from `eventMs` until `converged` first holds at a sample, or undefined
 * when it does not before `untilMs` (the next event, or the end).
 */
export function convergenceMs(
  sampleTimesMs: readonly number[],
  converged: readonly boolean[],
  eventMs: number,
  untilMs: number,
): number | undefined {
  for (let i = 0; i < sampleTimesMs.length; i++) {
    const t = sampleTimesMs[i]!
    if (t < eventMs) continue
    if (t >= untilMs) return undefined
    if (converged[i]) return t - eventMs
  }
  return undefined
}
