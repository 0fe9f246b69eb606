import type { Clock, LeaseGrant, Timer } from '../shared/index.js'

/**
 * How long a lease of 0 that says `rising` is waited on for the rise it announces: the
 * coordinator grants that rise as the other holders acknowledge their falls (a round trip), or in
 * part at a round once a first share has waited a second for them (server/pool/increases.ts,
 * `wholeFirstShareMs`). Past it, what the lease says stands.
 */
export const risingWaitMs = 1000

/**
 * A holder's wait for a rise its lease of 0 announces (`rising`, docs/protocol.md): while it
 * lasts, `ready()` does not resolve and a check the holder's share cannot decide waits for the
 * next lease rather than be refused or asked of the coordinator (#41: a gateway joining a round
 * after the others resolved `ready()` on a lease of 0, and its first checks were refused). Ends
 * at the next lease that is not such a 0, or `risingWaitMs` after the one that was (`onEnd`).
 */
export class RiseWait {
  readonly #clock: Clock
  readonly #onEnd: () => void
  #timer: Timer | undefined = undefined
  #untilMs = 0

  constructor(clock: Clock, onEnd: () => void) {
    this.#clock = clock
    this.#onEnd = onEnd
  }

  /** Whether a rise is waited for now. */
  get pending(): boolean {
    return this.#timer !== undefined
  }

  /** How long the wait may last yet, ms (0 when none). */
  get leftMs(): number {
    return this.#timer === undefined ? 0 : Math.max(0, this.#untilMs - this.#clock.now())
  }

  /**
   * A lease came: a rising 0 starts the wait (or goes on with the one started; a second such
   * lease does not make it longer); any other ends it. True while waiting: the caller holds its
   * `ready()` waiters. Ending here does not call `onEnd`: the caller handles the lease.
   */
  note(grant: LeaseGrant): boolean {
    if (grant.rising !== true || grant.capacity > 0) {
      this.cancel()
      return false
    }
    if (this.#timer !== undefined) return true
    this.#untilMs = this.#clock.now() + risingWaitMs
    this.#timer = this.#clock
      .setTimeout(() => {
        this.#timer = undefined
        this.#onEnd()
      }, risingWaitMs)
      .unref()
    return true
  }

  /** The holder closes, is revoked, or its lease stands: no wait. */
  cancel(): void {
    this.#timer?.cancel()
    this.#timer = undefined
  }
}
