import type { Scenario } from './scenario.js'

/** How many of the most asked-for keys are held to their due. */
export const hottestCounted = 20

/** A keyed family's run, as the summary shows it. */
export interface FamilySummary {
  /** The family's id, `<prefix>/*`. */
  readonly family: string
  readonly keys: number
  readonly keysSeen: number
  readonly checks: number
  readonly admitted: number
  /** Keys whose admissions, all processes together, went above capacity·t + burst over some interval. */
  readonly keysOverBound: number
  /** The most any key went above its bound, tokens (≤ 0: every key held, by that margin at the tightest). */
  readonly worstExcess: number
  /** The `hottestCounted` most asked-for keys: admitted ÷ min(capacity·t, asked) outside failovers, the least and the mean. */
  readonly hottestShareMin: number
  readonly hottestShareMean: number
  /** First checks of keys new everywhere outside failovers and the start, and how many were admitted. */
  readonly firstAdmitted: number
  readonly firstChecks: number
  /** Keys leased one by one at the coordinator at the end of the run. */
  readonly hotKeysAtEnd: number
}

/**
 * What the simulator counts of one keyed family, key by key, over all its
 * processes together: each key's admissions against a token bucket of the
 * key's capacity and burst that starts full (admissions fit in it exactly
 * when, over every interval, they stay within capacity·t + burst); what was
 * asked and admitted of each key outside failovers; and whether each key's
 * first check anywhere (outside failovers) was admitted. Typed arrays by key rank: a hundred
 * thousand keys cost a few megabytes.
 */
export class FamilyTrack {
  readonly id: string
  readonly prefix: string
  /** How many keys (ranks 0 … keys − 1). */
  readonly keys: number
  readonly #ratePerMs: number
  readonly #burst: number
  readonly #capacity: number
  readonly #tokens: Float64Array
  readonly #lastMs: Float64Array
  readonly #excess: Float64Array
  readonly #asked: Float64Array
  readonly #admitted: Float64Array
  readonly #seen: Uint8Array
  #steadyMs = 0
  #checks = 0
  #admittedAll = 0
  #firstChecks = 0
  #firstAdmitted = 0

  constructor(id: string, keys: number, capacity: number, burst: number) {
    this.id = id
    this.prefix = id.slice(0, -2)
    this.keys = keys
    this.#capacity = capacity
    this.#ratePerMs = capacity / 1000
    this.#burst = burst
    this.#tokens = new Float64Array(keys).fill(burst)
    this.#lastMs = new Float64Array(keys)
    this.#excess = new Float64Array(keys).fill(-Infinity)
    this.#asked = new Float64Array(keys)
    this.#admitted = new Float64Array(keys)
    this.#seen = new Uint8Array(keys)
  }

  /** The key of rank `k`, as the processes name it. */
  key(k: number): string {
    return `k${k}`
  }

  /** One check of key rank `k` at `nowMs`, admitted or not; `steady`: outside failovers. */
  check(k: number, ok: boolean, nowMs: number, steady: boolean): void {
    this.#checks++
    if (this.#seen[k] === 0) {
      this.#seen[k] = 1
      if (steady) this.#firstChecks++
      if (steady && ok) this.#firstAdmitted++
    }
    if (steady) this.#asked[k]!++
    if (!ok) return
    this.#admittedAll++
    if (steady) this.#admitted[k]!++
    const tokens = Math.min(
      this.#burst,
      this.#tokens[k]! + (nowMs - this.#lastMs[k]!) * this.#ratePerMs,
    )
    this.#lastMs[k] = nowMs
    this.#tokens[k] = tokens - 1
    if (1 - tokens > this.#excess[k]!) this.#excess[k] = 1 - tokens
  }

  /** A tick of `tickMs` outside failovers: the time the steady counts cover. */
  steadyTick(tickMs: number): void {
    this.#steadyMs += tickMs
  }

  summarise(hotKeysAtEnd: number): FamilySummary {
    let keysOverBound = 0
    let worstExcess = -Infinity
    let keysSeen = 0
    for (let k = 0; k < this.#excess.length; k++) {
      if (this.#seen[k] === 1) keysSeen++
      // A float's last bits are not an admission: 1e-6 of a token is allowed.
      if (this.#excess[k]! > 1e-6) keysOverBound++
      worstExcess = Math.max(worstExcess, this.#excess[k]!)
    }
    if (!Number.isFinite(worstExcess)) worstExcess = 0
    const ranks = Array.from(this.#asked.keys())
      .sort((a, b) => this.#asked[b]! - this.#asked[a]!)
      .slice(0, hottestCounted)
      .filter((k) => this.#asked[k]! > 0)
    const due = (k: number): number =>
      Math.min(this.#asked[k]!, (this.#capacity * this.#steadyMs) / 1000)
    const shares = ranks.map((k) => this.#admitted[k]! / due(k))
    return {
      family: this.id,
      keys: this.#excess.length,
      keysSeen,
      checks: this.#checks,
      admitted: this.#admittedAll,
      keysOverBound,
      worstExcess,
      hottestShareMin: shares.length === 0 ? 1 : Math.min(...shares),
      hottestShareMean: shares.length === 0 ? 1 : shares.reduce((a, b) => a + b, 0) / shares.length,
      firstAdmitted: this.#firstAdmitted,
      firstChecks: this.#firstChecks,
      hotKeysAtEnd,
    }
  }
}

/**
 * A family's checks: every key within capacity·t + burst over the whole run
 * (always), and what `expect` asks of its hottest keys and first checks.
 */
export function checkFamilies(
  expected: Scenario['expect'],
  families: readonly FamilySummary[],
): { name: string; ok: boolean; detail: string }[] {
  const checks: { name: string; ok: boolean; detail: string }[] = []
  for (const f of families) {
    checks.push({
      name: `${f.family}: every key admitted ≤ capacity·t + burst over the whole run`,
      ok: f.keysOverBound === 0,
      detail: `${f.keysOverBound} of ${f.keysSeen} keys over; ${f.worstExcess > 0 ? `${f.worstExcess.toFixed(2)} tokens over at worst` : `the tightest ${(-f.worstExcess).toFixed(2)} tokens inside`}`,
    })
    if (expected.minHotShare !== undefined)
      checks.push({
        name: `${f.family}: the ${hottestCounted} most asked-for keys get ≥ ${(expected.minHotShare * 100).toFixed(0)}% of min(capacity, demand) outside failovers`,
        ok: f.hottestShareMin >= expected.minHotShare,
        detail: `least ${(f.hottestShareMin * 100).toFixed(1)}%, mean ${(f.hottestShareMean * 100).toFixed(1)}%`,
      })
    if (expected.minFirstAdmitted !== undefined) {
      const share = f.firstChecks === 0 ? 1 : f.firstAdmitted / f.firstChecks
      checks.push({
        name: `${f.family}: ≥ ${(expected.minFirstAdmitted * 100).toFixed(0)}% of new keys' first checks admitted`,
        ok: share >= expected.minFirstAdmitted,
        detail: `${f.firstAdmitted} of ${f.firstChecks} (${(share * 100).toFixed(2)}%)`,
      })
    }
  }
  return checks
}
