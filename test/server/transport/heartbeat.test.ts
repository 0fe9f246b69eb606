import { describe, expect, it } from 'vitest'
import { closedAfterEach, simpleConfig, startCoordinator } from '../../helpers/coordinator.js'
import { waitFor } from '../../helpers/wait.js'
import { TestClient } from '../../helpers/ws-client.js'

const { running, clients } = closedAfterEach()

describe('the heartbeat pings a slice of the sessions per tick', () => {
  it('pings 20 sessions two per 100 ms tick of a 1 s period, each once a period', async () => {
    const heartbeatMs = 1000 // 10 slots of 100 ms
    const { server, clock } = await startCoordinator(
      simpleConfig({}, { limits: { roundDebounceMs: 0, heartbeatMs } }),
    )
    running.push(server)
    const pings = new Array<number>(20).fill(0)
    for (let i = 0; i < 20; i++) {
      const c = await TestClient.connect(server.wsUrl)
      clients.push(c)
      c.ws.on('ping', () => pings[i]!++)
      await c.hello(`c${i}`)
    }
    const total = (): number => pings.reduce((a, b) => a + b, 0)
    for (let period = 1; period <= 2; period++) {
      for (let tick = 1; tick <= 10; tick++) {
        clock.advance(100)
        const expected = (period - 1) * 20 + 2 * tick
        await waitFor(`${expected} pings`, () => (total() >= expected ? true : undefined), 5000)
        // Never more than this tick's slot: all at once would show 20 on the first tick.
        expect(total()).toBe(expected)
      }
      expect(pings.every((n) => n === period)).toBe(true)
    }
    // Ponged every time: nobody was closed for silence.
    expect(clients.every((c) => c.closeCode === undefined)).toBe(true)
  })
})
