/**
 * The yardstick of `npm run bench -- efficiency`: one exact central limiter
 * (what a Redis counter or bucket per key does, a round trip per request),
 * replaying the merged trace of every gateway's checks. Pure: the trace in,
 * what the central limiter would have admitted out, check by check.
 */

/** Checks of one key at one moment, as a gateway logged them: `asked` in all, `admitted` of them. */
export interface TraceEvent {
  /** Host monotonic ms (one clock for every process on the machine). */
  readonly t: number
  /** Wall-clock ms since the epoch: what a quota's windows are counted on. */
  readonly w: number
  readonly key: string
  readonly asked: number
  readonly admitted: number
}

/** A key's limit as the central limiter holds it. */
export type CentralLimit =
  | { readonly kind: 'rate'; readonly ratePerSec: number; readonly burst: number }
  | { readonly kind: 'quota'; readonly budget: number; readonly windowMs: number }

/** What the central limiter admits of each event of `trace` (sorted by `t` first), in its order. */
export function replayCentral(trace: readonly TraceEvent[], limit: CentralLimit): number[] {
  const order = trace.map((_, i) => i).sort((a, b) => trace[a]!.t - trace[b]!.t)
  const out: number[] = new Array<number>(trace.length).fill(0)
  if (limit.kind === 'rate') {
    // A token bucket per key, full at the key's first request.
    const buckets = new Map<string, { tokens: number; atMs: number }>()
    for (const i of order) {
      const e = trace[i]!
      let b = buckets.get(e.key)
      if (b === undefined) buckets.set(e.key, (b = { tokens: limit.burst, atMs: e.t }))
      b.tokens = Math.min(limit.burst, b.tokens + (limit.ratePerSec * (e.t - b.atMs)) / 1000)
      b.atMs = e.t
      const admit = Math.min(e.asked, Math.floor(b.tokens + 1e-9))
      b.tokens -= admit
      out[i] = admit
    }
    return out
  }
  // A counter per key per window (windows aligned to the epoch, as Sluice's are).
  const used = new Map<string, number>()
  for (const i of order) {
    const e = trace[i]!
    const id = `${e.key}@${Math.floor(e.w / limit.windowMs)}`
    const before = used.get(id) ?? 0
    const admit = Math.max(0, Math.min(e.asked, limit.budget - before))
    used.set(id, before + admit)
    out[i] = admit
  }
  return out
}

/** Sluice against the central limiter on one trace. */
export interface Comparison {
  /** Requests asked for, and admitted by each. */
  readonly asked: number
  readonly admitted: number
  readonly central: number
  /** Sluice admitted ÷ the central limiter admitted. */
  readonly ratio: number
  /** Requests the central limiter admitted that Sluice refused (counted event by event). */
  readonly centralOnly: number
  /** Keys where Sluice admitted less than 99% of what the central limiter did, of those it admitted 10 or more. */
  readonly keysShort: number
}

/** Compares what Sluice admitted in `trace` with what the central limiter admits of it (`central`, when replayed already). */
export function compare(
  trace: readonly TraceEvent[],
  limit: CentralLimit,
  central: readonly number[] = replayCentral(trace, limit),
): Comparison {
  let asked = 0
  let admitted = 0
  let centralAdmitted = 0
  let centralOnly = 0
  const byKey = new Map<string, { sluice: number; central: number }>()
  for (const [i, e] of trace.entries()) {
    const c = central[i]!
    asked += e.asked
    admitted += e.admitted
    centralAdmitted += c
    centralOnly += Math.max(0, c - e.admitted)
    const k = byKey.get(e.key) ?? { sluice: 0, central: 0 }
    k.sluice += e.admitted
    k.central += c
    byKey.set(e.key, k)
  }
  let keysShort = 0
  for (const k of byKey.values()) if (k.central >= 10 && k.sluice < 0.99 * k.central) keysShort++
  return {
    asked,
    admitted,
    central: centralAdmitted,
    ratio: centralAdmitted > 0 ? admitted / centralAdmitted : 1,
    centralOnly,
    keysShort,
  }
}
