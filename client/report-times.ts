/**
 * When the newest reports were sent, by number: a lease's window edge names one sent within a
 * few refresh periods (the coordinator's newest handled); an older one is not found, and that
 * lease keeps its own `endsInMs`.
 */
export class ReportTimes {
  static readonly size = 64
  readonly #n = new Float64Array(ReportTimes.size)
  readonly #atMs = new Float64Array(ReportTimes.size)

  set(n: number, atMs: number): void {
    const i = n % ReportTimes.size
    this.#n[i] = n
    this.#atMs[i] = atMs
  }

  get(n: number): number | undefined {
    const i = n % ReportTimes.size
    return this.#n[i] === n ? this.#atMs[i] : undefined
  }
}
