import { pino } from 'pino'
import { afterEach } from 'vitest'
import { createCoordinator, type RunningCoordinator } from '../../server/index.js'
import type { ConfigInput } from '../../server/config/index.js'
import { ManualClock } from '../../shared/index.js'
import type { TestClient } from './ws-client.js'

export const silentLogger = pino({ level: 'silent' })

/**
 * A real coordinator on 127.0.0.1 (a free port unless given) driven by a manual clock; `more`:
 * further options of `createCoordinator` (a data directory for the embedded ledger, ...).
 */
export async function startCoordinator(
  config: ConfigInput | string,
  clock = new ManualClock(),
  port = 0,
  more: { readonly dataDir?: string | false; readonly watchConfig?: boolean } = {},
): Promise<{ server: RunningCoordinator; clock: ManualClock }> {
  const server = await createCoordinator({
    config,
    host: '127.0.0.1',
    port,
    clock,
    logger: silentLogger,
    ...more,
  })
  return { server, clock }
}

/** A one-resource config with short periods and no learning. */
export function simpleConfig(
  overrides: Record<string, unknown> = {},
  server: Record<string, unknown> = {},
): ConfigInput {
  return {
    server: { limits: { roundDebounceMs: 0 }, ...server },
    resources: [
      {
        match: 'api',
        kind: 'rate',
        capacity: 300,
        leaseTtlMs: 1000,
        refreshMs: 100,
        graceMs: 200,
        learningMs: 0,
        unsafeLearning: true,
        surplus: 'hold',
        demand: { window: 1 },
        ...overrides,
      },
    ],
  }
}

/**
 * A rate resource `api` (300/s, quick refresh) and a concurrency resource `db` (10 slots), as
 * an operator's views (dashboard, `sluice top`) show them.
 */
export function apiAndDbConfig(): ConfigInput {
  const { resources, server } = simpleConfig({ surplus: 'spread' })
  return {
    server,
    resources: [
      ...resources,
      { match: 'db', kind: 'concurrency', capacity: 10, learningMs: 0, unsafeLearning: true },
    ],
  }
}

/** Coordinators and test clients a test file starts; all closed after each test. */
export function closedAfterEach(): {
  running: Array<{ close(): Promise<void> }>
  clients: TestClient[]
} {
  const running: Array<{ close(): Promise<void> }> = []
  const clients: TestClient[] = []
  afterEach(async () => {
    for (const c of clients.splice(0)) c.ws.terminate()
    for (const r of running.splice(0)) await r.close()
  })
  return { running, clients }
}
