import { describe, expect, it } from 'vitest'
import { Turns } from '../../../server/transport/turns.js'
import type { ServerMessage } from '../../../shared/index.js'
import { closedAfterEach, simpleConfig, startCoordinator } from '../../helpers/coordinator.js'
import { TestClient } from '../../helpers/ws-client.js'

describe('Turns', () => {
  it('numbers turns, asks for a next turn only when read or waited on, and runs what waits there', () => {
    const pending: (() => void)[] = []
    const turns = new Turns((f) => pending.push(f))
    expect(pending).toHaveLength(0)
    const first = turns.now
    expect(turns.now).toBe(first)
    expect(pending).toHaveLength(1)
    const ran: number[] = []
    turns.later(() => ran.push(turns.now))
    expect(pending).toHaveLength(1)
    pending.shift()!()
    expect(ran).toEqual([first + 1])
    // Read during the turn it ran in: the next turn is asked for again.
    expect(pending).toHaveLength(1)
    pending.shift()!()
    expect(turns.now).toBe(first + 2)
  })
})

const { running, clients } = closedAfterEach()

async function start() {
  const config = simpleConfig()
  config.resources = [
    ...config.resources,
    {
      match: 'k/*',
      keyed: true,
      kind: 'rate',
      capacity: 1000,
      learningMs: 0,
      unsafeLearning: true,
    },
  ]
  const { server, clock } = await startCoordinator(config)
  running.push(server)
  const c = await TestClient.connect(server.wsUrl)
  clients.push(c)
  await c.hello('a')
  return { server, clock, c }
}

const burst = 40

describe('a connection’s frames past its share of a turn (ws-session.ts)', () => {
  it('are handled in order at later turns, and a ping after them is answered after them', async () => {
    const { c } = await start()
    for (let i = 0; i < burst; i++) c.send({ type: 'decide', asks: [[i, 'k/x', 1]] })
    // One round trip: every frame sent before the ping was handled (ws's automatic pong
    // would answer at once, before the frames that wait).
    await c.flush()
    const decided = c.received.filter(
      (m): m is Extract<ServerMessage, { type: 'decided' }> => m.type === 'decided',
    )
    expect(decided.flatMap((m) => m.answers.map((a) => a[0]))).toEqual(
      Array.from({ length: burst }, (_, i) => i),
    )
  })

  it('are handled before the close that came after them (a release is not lost)', async () => {
    const { server, clock, c } = await start()
    c.send({ type: 'demand', resources: [{ resource: 'api', wants: 100 }] })
    await c.flush()
    clock.advance(0)
    const lease = await c.nextLease('api')
    c.send({ type: 'ack', seq: lease.seq })
    await c.flush()
    expect(server.coordinator.view.committed('api')).toBeGreaterThan(0)
    for (let i = 0; i < burst; i++) c.send({ type: 'decide', asks: [[i, 'k/y', 1]] })
    c.send({ type: 'release', resources: ['api'] })
    await c.close()
    await expect.poll(() => server.coordinator.view.committed('api')).toBe(0)
  })
})
