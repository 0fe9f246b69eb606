import { createClient, type Resource, type SluiceClient } from '../../client/index.js'
import type { ConfigInput } from '../../server/config/index.js'
import { createCoordinator, type RunningCoordinator } from '../../server/index.js'
import { ManualClock } from '../../shared/index.js'
import { silentLogger } from './coordinator.js'

/**
 * A real coordinator and real clients on one manual clock. `step(ms)` moves
 * time, then lets every client exchange what that caused with the
 * coordinator (two round trips: reports in, rounds and leases out, acks in).
 */
export class Cluster {
  readonly clock = new ManualClock()
  server!: RunningCoordinator
  readonly clients: SluiceClient[] = []
  port = 0

  async start(config: ConfigInput, port = 0): Promise<void> {
    this.server = await createCoordinator({
      config,
      host: '127.0.0.1',
      port,
      clock: this.clock,
      logger: silentLogger,
    })
    this.port = this.server.port
  }

  /** Stops the coordinator and waits until every connected client has seen its connection close. */
  async stop(): Promise<void> {
    const gone = this.clients
      .filter((c) => c.connected)
      .map((c) => new Promise((resolve) => c.once('disconnect', resolve)))
    await this.server.close()
    await Promise.all(gone)
  }

  async client(
    id: string,
    extra: {
      name?: string
      token?: string
      hotPathClock?: 'coarse' | 'precise'
      maxFrameBytes?: number
    } = {},
  ): Promise<SluiceClient> {
    const client = createClient({
      ...extra,
      url: `ws://127.0.0.1:${this.port}/v1/connect`,
      clientId: id,
      clock: this.clock,
      random: () => 0.5,
      backoffBaseMs: 50,
      backoffCapMs: 200,
    })
    this.clients.push(client)
    await new Promise<void>((resolve) => client.once('connect', () => resolve()))
    return client
  }

  async settle(): Promise<void> {
    for (let i = 0; i < 3; i++) {
      await this.ledgerIdle()
      await Promise.all(this.clients.map((c) => c.roundTrip()))
    }
    // One real request through the loopback as well, so connection attempts of clients that are
    // not connected (which roundTrip skips) make progress between steps.
    if (this.clients.some((c) => !c.connected))
      await fetch(`${this.server.url}/healthz`).catch(() => undefined)
  }

  /** Steps the clock until every client is connected again. */
  async reconnected(stepMs = 10, maxSteps = 1000): Promise<void> {
    for (let i = 0; i < maxSteps && this.clients.some((c) => !c.connected); i++)
      await this.step(stepMs)
    if (this.clients.some((c) => !c.connected)) throw new Error('clients did not reconnect')
  }

  /** `p`, stepping the clock `stepMs` at a time until it settles (a remote answer takes a round trip). */
  async stepUntil<T>(p: Promise<T>, stepMs = 10, maxSteps = 200): Promise<T> {
    let done = false
    void p.then(
      () => (done = true),
      () => (done = true),
    )
    for (let i = 0; i < maxSteps && !done; i++) await this.step(stepMs)
    return p
  }

  async step(ms: number): Promise<void> {
    // What the clients sent since the last step (an ack of a lease, a report) reaches the
    // coordinator before the clock moves: the coordinator reads one frame per connection per
    // turn of the event loop (server/transport/gateway.ts), so a test's continuation may run
    // before a frame that arrived with it is handled.
    await Promise.all(this.clients.map((c) => c.roundTrip()))
    await this.ledgerIdle()
    this.clock.advance(ms)
    await this.settle()
  }

  /**
   * With a ledger, leases leave once the write that covers them is durable: real time, not the
   * manual clock's. Waiting for it here keeps a step's outcome from depending on how fast the
   * disk is (a loaded CI machine otherwise moved the clock on while a lease was being written).
   */
  async ledgerIdle(): Promise<void> {
    await this.server.coordinator.ledgerIdle()
  }

  committed(resource: string): number {
    return this.server.coordinator.view.committed(resource)
  }

  async close(): Promise<void> {
    await Promise.all(this.clients.map((c) => c.close()))
    await this.server.close()
  }
}

/** Calls tryAcquire at `ratePerSec` on the manual clock, counting admissions. */
export class Load {
  admitted = 0
  #owed = 0
  constructor(
    readonly resource: Resource,
    public ratePerSec: number,
  ) {}

  tick(ms: number): void {
    this.#owed += (this.ratePerSec * ms) / 1000
    while (this.#owed >= 1) {
      this.#owed -= 1
      if (this.resource.tryAcquire()) this.admitted++
    }
  }
}
