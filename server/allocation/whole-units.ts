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

/**
 * A rate share below `unit` (a key's capacity ÷ its burst) carries less than
 * one token of burst, and a token bucket that never holds a whole token
 * admits nothing: a key of 20/s asked for by 100 processes got 0.2/s each,
 * and 0 of its capacity was used (the simulator, 100 holders). The shares
 * of at least `unit` are kept; those below are pooled and handed out again
 * one `unit` each, as many as the pool holds: first to those that `held` a
 * unit already and still ask (a share that moves costs a decrease, an ack
 * and a bucket that starts empty, and demand reported each period jumps),
 * then to those that would use most of one (their `wants`, in quarters of a
 * unit), then to the larger grant, ties to the earlier index. Σ never
 * grows, and what were slivers admit.
 */
export function wholeTokens(
  grants: Float64Array,
  unit: number,
  of: { readonly held?: (i: number) => number; readonly wants?: (i: number) => number } = {},
): Float64Array {
  const small: number[] = []
  let pooled = 0
  for (let i = 0; i < grants.length; i++) {
    const g = grants[i]!
    if (g > 0 && g < unit * (1 - 1e-9)) {
      small.push(i)
      pooled += g
    }
  }
  if (small.length === 0) return grants
  const out = Float64Array.from(grants)
  for (const i of small) out[i] = 0
  let units = wholeSlots(pooled / unit)
  const wants = (i: number): number => (of.wants === undefined ? unit : of.wants(i))
  // Kept by a holder while it asks at all (a demand that has decayed below a thousandth of a
  // unit is a holder that stopped).
  const keeps = (i: number): number =>
    of.held !== undefined && of.held(i) >= unit * (1 - 1e-9) && wants(i) >= unit / 1000 ? 0 : 1
  const use = (i: number): number => Math.floor((4 * Math.min(wants(i), unit)) / unit)
  small.sort((a, b) => keeps(a) - keeps(b) || use(b) - use(a) || grants[b]! - grants[a]! || a - b)
  for (const i of small) {
    if (units <= 0) break
    out[i] = unit
    units--
  }
  return out
}
