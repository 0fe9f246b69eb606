import type { IncomingMessage } from 'node:http'
import { setFlagsFromString } from 'node:v8'
import { runInNewContext } from 'node:vm'
import { describe, expect, it } from 'vitest'
import { closedAfterEach, simpleConfig, startCoordinator } from '../../helpers/coordinator.js'
import { TestClient } from '../../helpers/ws-client.js'

const { running, clients } = closedAfterEach()

/** A full garbage collection, on demand (the flag is set for this worker only). */
function collectGarbage(): void {
  setFlagsFromString('--expose-gc')
  ;(runInNewContext('gc') as () => void)()
}

describe('what a connection keeps alive', () => {
  it('lets the upgrade request go once the session is open (it is not per-client memory)', async () => {
    const { server, clock } = await startCoordinator(simpleConfig())
    running.push(server)
    // Watch every upgrade request without holding it.
    const requests: WeakRef<IncomingMessage>[] = []
    server.http.server.on('upgrade', (req: IncomingMessage) => requests.push(new WeakRef(req)))
    for (let i = 0; i < 20; i++) {
      const c = await TestClient.connect(server.wsUrl)
      clients.push(c)
      await c.hello(`client-${i}`)
      c.send({ type: 'demand', resources: [{ resource: 'api', wants: 5 }] })
      await c.flush()
    }
    clock.advance(0) // the prompt round after the joins
    for (const c of clients) await c.nextLease('api')
    expect(requests).toHaveLength(20)
    // The connections stay open: only what they should not hold may go.
    for (let i = 0; i < 3; i++) {
      await clients[0]!.flush() // a round trip: whatever the coordinator had queued has run
      collectGarbage()
    }
    expect(requests.filter((r) => r.deref() !== undefined)).toHaveLength(0)
    expect(clients.every((c) => c.closeCode === undefined)).toBe(true)
  })
})
