/** What each history sample holds, per resource. Rates are per second; slots for concurrency. */
export const historyFields = [
  'capacity',
  'committed',
  'demand',
  'admitted',
  'refused',
  'inFlight',
  'waiting',
  'clients',
] as const
export type HistoryField = (typeof historyFields)[number]

/** A time range of samples, by column (the shape charting libraries take). */
export interface HistorySeries {
  readonly stepMs: number
  /** Sample times, ms since the epoch. */
  readonly t: number[]
  readonly columns: Record<HistoryField, number[]>
}

/**
 * A ring of samples taken every `stepMs`: times as Float64, values as
 * Float32 (a chart needs no more), one column per field. Fixed memory:
 * `length × (8 + 4 × fields)` bytes.
 */
export class HistoryRing {
  readonly stepMs: number
  readonly length: number
  readonly #t: Float64Array
  readonly #columns: Float32Array[]
  #next = 0
  #count = 0

  constructor(stepMs: number, length: number) {
    this.stepMs = stepMs
    this.length = length
    this.#t = new Float64Array(length)
    this.#columns = historyFields.map(() => new Float32Array(length))
  }

  static bytes(length: number): number {
    return length * (8 + 4 * historyFields.length)
  }

  get count(): number {
    return this.#count
  }

  push(tMs: number, values: ArrayLike<number>): void {
    const i = this.#next
    this.#t[i] = tMs
    for (let f = 0; f < this.#columns.length; f++) this.#columns[f]![i] = values[f]!
    this.#next = (i + 1) % this.length
    if (this.#count < this.length) this.#count++
  }

  /** Samples with fromMs ≤ t ≤ toMs, oldest first. */
  range(fromMs: number, toMs: number): HistorySeries {
    const t: number[] = []
    const columns = Object.fromEntries(historyFields.map((f) => [f, [] as number[]])) as Record<
      HistoryField,
      number[]
    >
    const start = (this.#next - this.#count + this.length) % this.length
    for (let k = 0; k < this.#count; k++) {
      const i = (start + k) % this.length
      const at = this.#t[i]!
      if (at < fromMs || at > toMs) continue
      t.push(at)
      for (let f = 0; f < historyFields.length; f++)
        columns[historyFields[f]!].push(this.#columns[f]![i]!)
    }
    return { stepMs: this.stepMs, t, columns }
  }
}

/** Samples kept: 15 minutes at 1 s, and 24 hours at 1 minute. */
export const historyShape = Object.freeze({
  secondStepMs: 1000,
  seconds: 900,
  minuteStepMs: 60_000,
  minutes: 1440,
})

/** Bytes one resource's history takes (both rings), for the memory bound. */
export const historyBytesPerResource =
  HistoryRing.bytes(historyShape.seconds) + HistoryRing.bytes(historyShape.minutes)

/**
 * One resource's history: every second's sample, and each minute's mean of
 * them. Values come in `historyFields` order.
 */
export class ResourceHistory {
  readonly seconds = new HistoryRing(historyShape.secondStepMs, historyShape.seconds)
  readonly minutes = new HistoryRing(historyShape.minuteStepMs, historyShape.minutes)
  readonly #sum = new Float64Array(historyFields.length)
  #inMinute = 0
  #minute = -1

  add(tMs: number, values: ArrayLike<number>): void {
    const minute = Math.floor(tMs / historyShape.minuteStepMs)
    if (minute !== this.#minute && this.#inMinute > 0) this.#closeMinute()
    this.#minute = minute
    this.seconds.push(tMs, values)
    for (let f = 0; f < this.#sum.length; f++) this.#sum[f]! += values[f]!
    this.#inMinute++
  }

  #closeMinute(): void {
    const mean = new Float64Array(this.#sum.length)
    for (let f = 0; f < mean.length; f++) mean[f] = this.#sum[f]! / this.#inMinute
    this.minutes.push(this.#minute * historyShape.minuteStepMs, mean)
    this.#sum.fill(0)
    this.#inMinute = 0
  }

  /** The samples of a range: by the second when it fits in the seconds ring, else by the minute. */
  range(fromMs: number, toMs: number): HistorySeries {
    const secondsSpanMs = historyShape.seconds * historyShape.secondStepMs
    return toMs - fromMs <= secondsSpanMs
      ? this.seconds.range(fromMs, toMs)
      : this.minutes.range(fromMs, toMs)
  }
}
