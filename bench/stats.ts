/** Median, min and max of a list of samples. */
export function summarise(samples: readonly number[]): {
  median: number
  min: number
  max: number
} {
  const sorted = [...samples].sort((a, b) => a - b)
  const mid = sorted.length >> 1
  const median = sorted.length % 2 === 1 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2
  return { median, min: sorted[0]!, max: sorted[sorted.length - 1]! }
}

/** `7.6M (6.9M–10.3M)`: the median and range of samples, in k and M, with a unit after the median. */
export function medianRange(samples: readonly number[], unit = ''): string {
  const s = summarise(samples)
  const f = (x: number): string =>
    x >= 1e6
      ? `${(x / 1e6).toFixed(1)}M`
      : x >= 1e3
        ? `${(x / 1e3).toFixed(1)}k`
        : x.toFixed(x < 10 ? 2 : 0)
  return `${f(s.median)}${unit} (${f(s.min)}–${f(s.max)})`
}

export { seededRandom as random } from '../shared/random.js'
