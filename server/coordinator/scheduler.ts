import type { Clock, Timer } from '../../shared/index.js'

interface Schedule {
  refreshMs: number
  interval: Timer
  prompt: Timer | undefined
  grant: Timer | undefined
  /** A quota's round at its window's edge, and when. */
  edge: Timer | undefined
  edgeAtMs: number
  /** A quota's leases sent again just before its window's edge (`renewAt`), and when. */
  renewal: Timer | undefined
  renewalAtMs: number
}

/**
 * When rounds run: one interval per resource (its refreshMs) and at most one
 * prompt round pending per resource (debounced, so a burst of joins or
 * reports costs one round); and, lighter, at most one pending grant of
 * waiting increases (after acks, debounced the same). It only keeps timers;
 * the round and the grant are the caller's.
 */
export class RoundScheduler {
  readonly #clock: Clock
  readonly #run: (resourceId: string) => void
  readonly #grant: (resourceId: string) => void
  readonly #renew: (resourceId: string) => void
  readonly #debounceMs: () => number
  readonly #schedules = new Map<string, Schedule>()

  constructor(
    clock: Clock,
    debounceMs: () => number,
    run: (resourceId: string) => void,
    grant: (resourceId: string) => void = () => undefined,
    renew: (resourceId: string) => void = () => undefined,
  ) {
    this.#clock = clock
    this.#debounceMs = debounceMs
    this.#run = run
    this.#grant = grant
    this.#renew = renew
  }

  has(resourceId: string): boolean {
    return this.#schedules.has(resourceId)
  }

  ids(): string[] {
    return [...this.#schedules.keys()]
  }

  /** Starts the periodic rounds of a resource; false when it already had them. */
  ensure(resourceId: string, refreshMs: number): boolean {
    if (this.#schedules.has(resourceId)) return false
    const interval = this.#clock.setInterval(() => this.#run(resourceId), refreshMs).unref()
    this.#schedules.set(resourceId, {
      refreshMs,
      interval,
      prompt: undefined,
      grant: undefined,
      edge: undefined,
      edgeAtMs: Number.NaN,
      renewal: undefined,
      renewalAtMs: Number.NaN,
    })
    return true
  }

  /** A new period (config reload): the interval is re-armed only when it changed. */
  reschedule(resourceId: string, refreshMs: number): void {
    const schedule = this.#schedules.get(resourceId)
    if (schedule === undefined || schedule.refreshMs === refreshMs) return
    this.drop(resourceId)
    this.ensure(resourceId, refreshMs)
  }

  /** A round soon (debounced); a no-op while one is pending or the resource has no schedule. */
  prompt(resourceId: string): void {
    const schedule = this.#schedules.get(resourceId)
    if (schedule === undefined || schedule.prompt !== undefined) return
    schedule.prompt = this.#clock.setTimeout(() => {
      schedule.prompt = undefined
      this.#run(resourceId)
    }, this.#debounceMs())
  }

  /** A grant of waiting increases soon (debounced); a no-op while it or a prompt round is pending. */
  promptGrant(resourceId: string): void {
    const schedule = this.#schedules.get(resourceId)
    if (schedule === undefined || schedule.prompt !== undefined || schedule.grant !== undefined)
      return
    schedule.grant = this.#clock.setTimeout(() => {
      schedule.grant = undefined
      this.#grant(resourceId)
    }, this.#debounceMs())
  }

  /**
   * A round at `atMs` (a quota's window edge: the next window's leases go out at once, not a
   * refresh period later); a no-op when that one is armed already.
   */
  edgeAt(resourceId: string, atMs: number): void {
    const schedule = this.#schedules.get(resourceId)
    if (schedule === undefined || schedule.edgeAtMs === atMs) return
    schedule.edge?.cancel()
    schedule.edgeAtMs = atMs
    schedule.edge = this.#clock.setTimeout(
      () => {
        schedule.edge = undefined
        this.#run(resourceId)
      },
      Math.max(0, atMs - this.#clock.now()),
    )
    schedule.edge.unref()
  }

  /**
   * The quota's leases sent again at `atMs`, just before its window's edge (the caller's
   * `renew`); a no-op when that one is armed already, or when `atMs` has passed.
   */
  renewAt(resourceId: string, atMs: number): void {
    const schedule = this.#schedules.get(resourceId)
    if (schedule === undefined || schedule.renewalAtMs === atMs) return
    schedule.renewal?.cancel()
    schedule.renewal = undefined
    schedule.renewalAtMs = atMs
    const inMs = atMs - this.#clock.now()
    if (inMs <= 0) return
    schedule.renewal = this.#clock.setTimeout(() => {
      schedule.renewal = undefined
      this.#renew(resourceId)
    }, inMs)
    schedule.renewal.unref()
  }

  /** A round is running now: a pending prompt round or grant would only repeat it. */
  settlePrompt(resourceId: string): void {
    const schedule = this.#schedules.get(resourceId)
    if (schedule === undefined) return
    schedule.prompt?.cancel()
    schedule.prompt = undefined
    schedule.grant?.cancel()
    schedule.grant = undefined
  }

  /** Stops a resource's rounds; false when it had none. */
  drop(resourceId: string): boolean {
    const schedule = this.#schedules.get(resourceId)
    if (schedule === undefined) return false
    schedule.interval.cancel()
    schedule.prompt?.cancel()
    schedule.grant?.cancel()
    schedule.edge?.cancel()
    schedule.renewal?.cancel()
    this.#schedules.delete(resourceId)
    return true
  }
}
