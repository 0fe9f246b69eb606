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

export { seededRandom as random } from '../shared/random.js'
