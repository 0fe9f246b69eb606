import type { Usage } from '../shared/index.js'

/**
 * Measured demand of one resource: tokens asked for (granted or refused,
 * waiting callers included) per second over the current report window. For
 * a concurrency resource, the peak of in-flight plus waiting over the window.
 */
export class DemandMeter {
  #asked = 0
  #windowStartMs: number
  #peak = 0
  // Usage since the last report: what the limiter admitted and refused, tokens and calls.
  #usageStartMs: number
  #admitted = 0
  #admittedCalls = 0
  #refused = 0
  #refusedCalls = 0
  #peakInFlight = 0

  constructor(nowMs: number) {
    this.#windowStartMs = nowMs
    this.#usageStartMs = nowMs
  }

  /** Counts an admission of `cost` (tokens or slots). */
  admitted(cost: number): void {
    this.#admitted += cost
    this.#admittedCalls++
  }

  /** Counts a refusal of `cost` (a policing check that said no, or a waiter that gave up). */
  refused(cost: number): void {
    this.#refused += cost
    this.#refusedCalls++
  }

  /** Records slots in flight now (concurrency), for the peak of the report window. */
  inFlight(slots: number): void {
    if (slots > this.#peakInFlight) this.#peakInFlight = slots
  }

  /** Usage since the last call, then starts counting anew. */
  takeUsage(nowMs: number, waiting: number, inFlight: number | undefined): Usage {
    const usage: Usage = {
      windowMs: Math.max(1, Math.round(nowMs - this.#usageStartMs)),
      admitted: this.#admitted,
      refused: this.#refused,
      admittedCalls: this.#admittedCalls,
      refusedCalls: this.#refusedCalls,
      waiting,
      ...(inFlight === undefined
        ? {}
        : { inFlight, peakInFlight: Math.max(this.#peakInFlight, inFlight) }),
    }
    this.#usageStartMs = nowMs
    this.#admitted = this.#admittedCalls = this.#refused = this.#refusedCalls = 0
    this.#peakInFlight = inFlight ?? 0
    return usage
  }

  /** Records tokens asked for (rate). */
  ask(cost: number): void {
    this.#asked += cost
  }

  /** Records the slots in use or waited for (concurrency). */
  observe(slots: number): void {
    if (slots > this.#peak) this.#peak = slots
  }

  /**
   * Demand over the window ending now, then starts a new window: tokens
   * asked for per second (`perSecond`), else the peak of slots in use or
   * waited for, `current` included.
   */
  take(nowMs: number, perSecond: boolean, current: number): number {
    const elapsedSec = Math.max(0.001, (nowMs - this.#windowStartMs) / 1000)
    const value = perSecond ? this.#asked / elapsedSec : Math.max(this.#peak, current)
    this.#asked = 0
    this.#peak = current
    this.#windowStartMs = nowMs
    return value
  }

  /** Rate asked for so far in this window (for the early-report check). */
  rateSoFar(nowMs: number): number {
    const elapsedSec = (nowMs - this.#windowStartMs) / 1000
    return elapsedSec > 0 ? this.#asked / elapsedSec : 0
  }
}
