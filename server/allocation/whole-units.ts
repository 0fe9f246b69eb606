import { wholeSlots } from '../../shared/index.js'

/**
 * Rounds an allocation to whole units (concurrency slots) by largest
 * remainder: each grant becomes its floor or its ceiling, and the units the
 * floors leave over go to the largest fractional parts, ties to the earlier
 * index, so Σ = floor(Σ grants) and no slot of capacity is stranded by
 * rounding. A semaphore can only use whole slots: without this, twenty
 * clients with 2.5 slots each would use 40 of 50.
 */
export function wholeUnits(grants: Float64Array): Float64Array {
  const n = grants.length
  const out = new Float64Array(n)
  let total = 0
  let floors = 0
  for (let i = 0; i < n; i++) {
    const g = grants[i]!
    total += g
    // Values a hair below an integer (float noise) count as that integer.
    out[i] = wholeSlots(g)
    floors += out[i]!
  }
  let leftover = wholeSlots(total) - floors
  if (leftover <= 0) return out
  const order = Array.from({ length: n }, (_, i) => i)
    .filter((i) => grants[i]! - out[i]! > 1e-9)
    .sort((a, b) => grants[b]! - out[b]! - (grants[a]! - out[a]!) || a - b)
  for (const i of order) {
    if (leftover <= 0) break
    out[i]!++
    leftover--
  }
  return out
}
