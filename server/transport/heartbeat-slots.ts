/**
 * Sessions dealt into the slots of a heartbeat period, so that each tick
 * pings one slot's share instead of every session at once. Pinging 18,000
 * sessions in one go held the coordinator's event loop for about 300 ms
 * every period (docs/benchmarks.md, "The heartbeat in slices"); in slices
 * each tick handles about `size / slotCount` sessions.
 *
 * Each session keeps its slot for life, so it is visited exactly once per
 * `slotCount` ticks, one whole period apart, however many others come and
 * go. A new session goes into the slot holding the fewest, which keeps the
 * slots even under any churn. Pure: the caller owns the timer.
 */
export class HeartbeatSlots<T> {
  readonly #slots: Set<T>[]
  readonly #slotOf = new Map<T, number>()
  #due = 0

  constructor(slotCount: number) {
    if (!Number.isInteger(slotCount) || slotCount < 1)
      throw new RangeError(`slotCount must be an integer ≥ 1, received ${slotCount}`)
    this.#slots = Array.from({ length: slotCount }, () => new Set<T>())
  }

  /** How many slots a period of `periodMs` is cut into: ticks of about 100 ms, at most 150. */
  static countFor(periodMs: number): number {
    return Math.min(150, Math.max(1, Math.floor(periodMs / 100)))
  }

  get slotCount(): number {
    return this.#slots.length
  }

  get size(): number {
    return this.#slotOf.size
  }

  add(item: T): void {
    if (this.#slotOf.has(item)) return
    let best = 0
    for (let i = 1; i < this.#slots.length; i++)
      if (this.#slots[i]!.size < this.#slots[best]!.size) best = i
    this.#slots[best]!.add(item)
    this.#slotOf.set(item, best)
  }

  delete(item: T): void {
    const slot = this.#slotOf.get(item)
    if (slot === undefined) return
    this.#slots[slot]!.delete(item)
    this.#slotOf.delete(item)
  }

  /** The slot whose turn it is (then the next one's): visit each of its items once. */
  nextDue(): ReadonlySet<T> {
    const slot = this.#slots[this.#due]!
    this.#due = (this.#due + 1) % this.#slots.length
    return slot
  }
}
