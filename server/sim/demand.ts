import type { DemandSpec } from './scenario.js'

/**
 * One client's demand over time. Calls must come with non-decreasing times
 * (a random walk is generated as time passes, from the client's own seeded
 * stream, so it is the same on every run).
 */
export class DemandCurve {
  readonly #spec: DemandSpec
  readonly #random: () => number
  #walkIndex = 0
  #walkValue = 0

  constructor(spec: DemandSpec, random: () => number) {
    this.#spec = spec
    this.#random = random
    if (spec.type === 'randomWalk') this.#walkValue = spec.start
  }

  at(tSec: number): number {
    const s = this.#spec
    switch (s.type) {
      case 'constant':
        return s.rate
      case 'steps': {
        let value = 0
        for (const [atSec, rate] of s.steps) if (tSec >= atSec) value = rate
        return value
      }
      case 'ramp': {
        if (tSec <= s.startSec) return s.from
        if (tSec >= s.endSec) return s.to
        return s.from + ((s.to - s.from) * (tSec - s.startSec)) / (s.endSec - s.startSec)
      }
      case 'randomWalk': {
        const index = Math.floor(tSec / s.everySec)
        while (this.#walkIndex < index) {
          this.#walkIndex++
          const step = (this.#random() * 2 - 1) * s.stepMax
          this.#walkValue = Math.min(s.max, Math.max(s.min, this.#walkValue + step))
        }
        return this.#walkValue
      }
    }
  }
}
