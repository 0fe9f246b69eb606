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

describe('early demand reports', () => {
  it('reports early when throttled well below demand, at most maxEarlyReportsPerRefresh times a period', async () => {
    const clock = new ManualClock()
    const reports: DemandMessage[] = []
    let socket: WebSocket | undefined
    const scripted = await scriptedCoordinator((ws, msg) => {
      socket = ws
      if (msg.type === 'hello')
        ws.send(
          JSON.stringify({
            type: 'lease',
            seq: 1,
            leases: [
              {
                resource: 'api',
                kind: 'rate',
                capacity: 10,
                burst: 10,
                ttlMs: 60000,
                refreshMs: 1000,
                safeCapacity: 0,
                safeHoldMs: 0,
              },
            ],
          }),
        )
      if (msg.type === 'demand') reports.push(msg as DemandMessage)
    })
    server = scripted.server
    const { port } = scripted
    client = createClient({
      url: `ws://127.0.0.1:${port}/v1/connect`,
      clientId: 'x',
      clock,
      maxEarlyReportsPerRefresh: 2,
    })
    const api = client.resource('api')
    await new Promise((resolve) => api.once('lease', resolve))
    await client.roundTrip()
    const regular = reports.length

    // Ask for 1000/s against a lease of 10/s for one period. Early reports are spaced period / (max + 1)
    // apart, so at most `max` fit in a period (the budget is a second guard).
    for (let t = 0; t < 1000; t += 10) {
      for (let i = 0; i < 10; i++) api.tryAcquire()
      clock.advance(10)
      await client.roundTrip()
    }
    const early = reports.slice(regular).filter((r) => r.early === true)
    expect(early.length).toBe(2)
    expect(early[0]!.resources[0]!.wants).toBeGreaterThan(500)
    // All on the one connection the client opened: being throttled never costs a reconnect.
    expect(server.clients.size).toBe(1)
    expect(socket?.readyState).toBe(socket?.OPEN)
  })
})
