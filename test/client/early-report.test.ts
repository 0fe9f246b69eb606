import { afterEach, describe, expect, it } from 'vitest'
import type { WebSocket, WebSocketServer } from 'ws'
import { createClient, type SluiceClient } from '../../client/index.js'
import { ManualClock, type DemandMessage } from '../../shared/index.js'
import { scriptedCoordinator } from '../helpers/scripted-coordinator.js'

// A scripted coordinator: welcomes, leases 10 tokens/s, and records every demand message.
let server: WebSocketServer | undefined
let client: SluiceClient | undefined
afterEach(async () => {
  await client?.close()
  await new Promise((resolve) => server?.close(resolve))
})

/**
 * A client of a scripted coordinator that welcomes it with `lease` and records every demand
 * message; the client reports on a manual clock, at most two early reports a period.
 */
async function leasing(lease: Record<string, unknown>): Promise<{
  c: SluiceClient
  clock: ManualClock
  reports: DemandMessage[]
  seen: { socket?: WebSocket }
}> {
  const clock = new ManualClock()
  const reports: DemandMessage[] = []
  const seen: { socket?: WebSocket } = {}
  const scripted = await scriptedCoordinator((ws, msg) => {
    seen.socket = ws
    if (msg.type === 'hello') ws.send(JSON.stringify({ type: 'lease', seq: 1, leases: [lease] }))
    if (msg.type === 'demand') reports.push(msg as DemandMessage)
  })
  server = scripted.server
  const c = createClient({
    url: `ws://127.0.0.1:${scripted.port}/v1/connect`,
    clientId: 'x',
    clock,
    maxEarlyReportsPerRefresh: 2,
  })
  client = c
  return { c, clock, reports, seen }
}

describe('early demand reports', () => {
  it('reports early when throttled well below demand, at most maxEarlyReportsPerRefresh times a period', async () => {
    const { c, clock, reports, seen } = await leasing({
      resource: 'api',
      kind: 'rate',
      capacity: 10,
      burst: 10,
      ttlMs: 60000,
      refreshMs: 1000,
      safeCapacity: 0,
      safeHoldMs: 0,
    })
    const api = c.resource('api')
    await new Promise((resolve) => api.once('lease', resolve))
    await c.roundTrip()
    const regular = reports.length

    // Ask for 1000/s against a lease of 10/s for one period. Early reports are spaced period / (max + 1)
    // apart, so at most `max` fit in a period (the budget is a second guard).
    for (let t = 0; t < 1000; t += 10) {
      for (let i = 0; i < 10; i++) api.tryAcquire()
      clock.advance(10)
      await c.roundTrip()
    }
    const early = reports.slice(regular).filter((r) => r.early === true)
    expect(early.length).toBe(2)
    expect(early[0]!.resources[0]!.wants).toBeGreaterThan(500)
    // All on the one connection the client opened: being throttled never costs a reconnect.
    expect(server!.clients.size).toBe(1)
    expect(seen.socket?.readyState).toBe(seen.socket?.OPEN)
  })

  // A quota's block sized on a demand measured before the pace rose ran dry once before it grew
  // (an early report came only after a refusal): half spent much faster than it was sized for,
  // it reports early, before any check is refused; half spent at the pace it was sized for, not.
  async function quotaClient(): Promise<{
    q: ReturnType<SluiceClient['resource']>
    clock: ManualClock
    reports: DemandMessage[]
  }> {
    const { c, clock, reports } = await leasing({
      resource: 'q',
      kind: 'quota',
      // A block of 100 in a window of a minute: 50 a second over two 1 s periods.
      capacity: 100,
      burst: 100,
      ttlMs: 60_000,
      refreshMs: 1000,
      safeCapacity: 0,
      safeHoldMs: 0,
      window: { index: 7, endsInMs: 60_000, quota: 1000, lengthMs: 60_000 },
    })
    const q = c.resource('q', { kind: 'quota' })
    await new Promise((resolve) => q.once('lease', resolve))
    await c.roundTrip()
    return { q, clock, reports }
  }

  /** Checks `perTick` at once every `tickMs` for `forMs`, on the manual clock; what was admitted. */
  async function spend(
    q: ReturnType<SluiceClient['resource']>,
    clock: ManualClock,
    perTick: number,
    tickMs: number,
    forMs: number,
  ): Promise<number> {
    let admitted = 0
    for (let t = 0; t < forMs; t += tickMs) {
      for (let i = 0; i < perTick; i++) if (q.tryAcquire()) admitted++
      clock.advance(tickMs)
      await client!.roundTrip()
    }
    return admitted
  }

  it('reports a quota early once half its block went much faster than it was sized for, before anything is refused', async () => {
    const { q, clock, reports } = await quotaClient()
    const before = reports.length
    // 5 every 10 ms (500 a second, ten times the block's pace): half of it in 100 ms.
    expect(await spend(q, clock, 5, 10, 100)).toBe(50)
    // The early report's timer: a period over (maxEarlyReportsPerRefresh + 1).
    clock.advance(400)
    await client!.roundTrip()
    const early = reports.slice(before).filter((r) => r.early === true)
    expect(early.length).toBe(1)
    expect(early[0]!.resources[0]).toMatchObject({ resource: 'q', used: 50, window: 7 })
  })

  it('sends no early report when the block is half spent at the pace it was sized for', async () => {
    const { q, clock, reports } = await quotaClient()
    const before = reports.length
    // 10 every 200 ms: 50 a second, the block's pace, reported as such each period; half of it
    // spent at 1 s, and less than a period's worth left from 1.2 s on.
    expect(await spend(q, clock, 10, 200, 1800)).toBe(90)
    const sent = reports.slice(before)
    expect(sent.length, 'the regular reports went').toBeGreaterThanOrEqual(1)
    expect(sent.filter((r) => r.early === true)).toEqual([])
  })
})
