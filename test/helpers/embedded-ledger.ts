import { createClient, type ClientOptions, type SluiceClient } from '../../client/index.js'
import type { createCoordinator, RunningCoordinator } from '../../server/index.js'
import type { ManualClock } from '../../shared/index.js'
import { startCoordinator } from './coordinator.js'

/** What `createCoordinator` takes as a config: its input, or a file's path. */
type CoordinatorConfig = Parameters<typeof createCoordinator>[0]['config']

/**
 * A coordinator with the embedded ledger (a file in `dataDir`) on a manual clock, restarted on
 * the same port and directory as a test needs, with clients that reconnect quickly; whatever
 * it starts is closed through `closers` (the test's afterEach runs them, last first).
 */
export function embeddedLedger(clock: ManualClock, closers: Array<() => Promise<unknown>>) {
  return {
    start: async (
      config: CoordinatorConfig,
      dataDir: string,
      port = 0,
    ): Promise<RunningCoordinator> => {
      const { server } = await startCoordinator(config, clock, port, {
        dataDir,
        watchConfig: false,
      })
      closers.push(() => server.close())
      return server
    },

    client: (url: string, id: string, options: Partial<ClientOptions> = {}): SluiceClient => {
      const c = createClient({
        url,
        clientId: id,
        clock,
        random: () => 0.5,
        backoffBaseMs: 20,
        backoffCapMs: 50,
        ...options,
      })
      c.on('error', () => undefined)
      closers.push(() => c.close())
      return c
    },

    /** Moves time, then lets every exchange it causes finish: ledger writes, leases, acks. */
    step: async (
      server: RunningCoordinator,
      clients: SluiceClient[],
      ms: number,
    ): Promise<void> => {
      clock.advance(ms)
      for (let i = 0; i < 3; i++) {
        await fetch(`${server.url}/healthz`).catch(() => undefined)
        await server.coordinator.ledgerIdle()
        await Promise.all(clients.filter((c) => c.connected).map((c) => c.roundTrip()))
      }
    },
  }
}
