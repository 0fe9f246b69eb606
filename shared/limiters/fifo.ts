/**
 * A FIFO queue with a head index instead of `shift()` (O(1) dequeue); the
 * array is compacted when the dead prefix outgrows the live part.
 */
export class Fifo<T> {
  #items: Array<T | undefined> = []
  #head = 0

  get length(): number {
    return this.#items.length - this.#head
  }

  push(item: T): void {
    this.#items.push(item)
  }

  peek(): T | undefined {
    return this.#head < this.#items.length ? this.#items[this.#head] : undefined
  }

  shift(): T | undefined {
    if (this.#head >= this.#items.length) return undefined
    const item = this.#items[this.#head]
    this.#items[this.#head++] = undefined
    if (this.#head > 64 && this.#head * 2 > this.#items.length) {
      this.#items = this.#items.slice(this.#head)
      this.#head = 0
    }
    return item
  }

  /** Removes one item wherever it is (a cancelled waiter); O(n). */
  remove(item: T): boolean {
    const i = this.#items.indexOf(item, this.#head)
    if (i < 0) return false
    this.#items.splice(i, 1)
    return true
  }

  *[Symbol.iterator](): IterableIterator<T> {
    for (let i = this.#head; i < this.#items.length; i++) yield this.#items[i]!
  }
}
