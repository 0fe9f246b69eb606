/**
 * What the fault suite measures, as pure functions of what the client
 * processes logged: admitted tokens against capacity·t + burst, the worst
 * one-second window, and slots in flight. Times are ms on the host's
 * monotonic clock, which every process on one machine shares.
 */

/** Tokens a process admitted at `t`. */
export interface Admission {
  readonly t: number
  readonly n: number
}

/** A slot taken (+1) or given back (−1) at `t`. */
export interface SlotEvent {
  readonly t: number
  readonly d: 1 | -1
}

/** Capacity over time: `capacity` from `fromMs` on, sorted by time. */
export type CapacitySteps = readonly { readonly fromMs: number; readonly capacity: number }[]

/** ∫capacity dt from the first step up to `t`, in tokens (capacity is per second). */
export function integral(steps: CapacitySteps, t: number): number {
  let total = 0
  for (let i = 0; i < steps.length; i++) {
    const s = steps[i]!
    if (t <= s.fromMs) break
    const end = Math.min(t, steps[i + 1]?.fromMs ?? Infinity)
    total += (s.capacity * (end - s.fromMs)) / 1000
  }
  return total
}

/**
 * The most admitted beyond ∫capacity + burst over any interval [tᵢ, tⱼ]
 * (both ends at admissions): max over i ≤ j of Σₖ₌ᵢ..ⱼ nₖ − ∫capacity − burst.
 * ≤ 0 when the bound held. Exact, in one pass: max over j of
 * (Sⱼ − C(tⱼ)) − min over i ≤ j of (Sᵢ₋₁ − C(tᵢ)).
 */
export function excessOverBound(
  admissions: readonly Admission[],
  steps: CapacitySteps,
  burst: number,
): number {
  const sorted = [...admissions].sort((a, b) => a.t - b.t)
  let before = 0
  let lowest = Infinity
  let worst = -Infinity
  for (const a of sorted) {
    const c = integral(steps, a.t)
    lowest = Math.min(lowest, before - c)
    before += a.n
    worst = Math.max(worst, before - c - lowest)
  }
  return sorted.length === 0 ? -burst : worst - burst
}

/** The most admitted in any window of `windowMs` starting at an admission, ÷ ∫capacity over it. */
export function worstWindowRatio(
  admissions: readonly Admission[],
  steps: CapacitySteps,
  windowMs = 1000,
): number {
  const sorted = [...admissions].sort((a, b) => a.t - b.t)
  let worst = 0
  let end = 0
  let inWindow = 0
  for (let start = 0; start < sorted.length; start++) {
    const from = sorted[start]!.t
    while (end < sorted.length && sorted[end]!.t < from + windowMs) inWindow += sorted[end++]!.n
    const cap = integral(steps, from + windowMs) - integral(steps, from)
    if (cap > 0) worst = Math.max(worst, inWindow / cap)
    inWindow -= sorted[start]!.n
  }
  return worst
}

/** The most slots in flight at once, merging every process's takes and releases (releases first at a tie). */
export function maxInFlight(events: readonly SlotEvent[]): number {
  const sorted = [...events].sort((a, b) => a.t - b.t || a.d - b.d)
  let now = 0
  let max = 0
  for (const e of sorted) {
    now += e.d
    max = Math.max(max, now)
  }
  return max
}

/** Admitted ÷ ∫capacity over [fromMs, toMs). */
export function utilisation(
  admissions: readonly Admission[],
  steps: CapacitySteps,
  fromMs: number,
  toMs: number,
): number {
  let admitted = 0
  for (const a of admissions) if (a.t >= fromMs && a.t < toMs) admitted += a.n
  const cap = integral(steps, toMs) - integral(steps, fromMs)
  return cap > 0 ? admitted / cap : 1
}
