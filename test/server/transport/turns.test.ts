import { EventEmitter } from 'node:events'
import type { IncomingMessage } from 'node:http'
import { describe, expect, it } from 'vitest'
import WebSocket from 'ws'
import { Turns, type TurnWaiter } from '../../../server/transport/turns.js'
import { WsSession } from '../../../server/transport/ws-session.js'
import { createCoordinator } from '../../../server/index.js'
import { ManualClock, nextTurn, systemClock, type ServerMessage } from '../../../shared/index.js'
import {
  closedAfterEach,
  silentLogger,
  simpleConfig,
  startCoordinator,
} from '../../helpers/coordinator.js'
import { TestClient } from '../../helpers/ws-client.js'

/** A connection's frames, each taking `ms` of `clock`, served through `turns`; `log` records them. */
function waiter(
  turns: Turns,
  clock: ManualClock,
  name: string,
  frames: number,
  log: string[],
  ms = 2,
  tenant: string | undefined = name,
): TurnWaiter {
  return {
    tenant,
    serveOne() {
      if (frames === 0) return 'done'
      if (!turns.mayHandle()) return 'full'
      frames--
      log.push(`${turns.now}:${name}`)
      clock.advance(ms)
      return frames > 0 ? 'more' : 'done'
    },
  }
}

describe('Turns', () => {
  it('handles frames for at most its budget of a turn, the first always', () => {
    const pending: (() => void)[] = []
    const clock = new ManualClock()
    const turns = new Turns(clock, 5, (f) => pending.push(f))
    expect(pending).toHaveLength(0)
    expect(turns.mayHandle(), 'the first frame of a turn').toBe(true)
    // A turn that handled anything asks for the next, once.
    expect(pending).toHaveLength(1)
    clock.advance(50)
    expect(turns.mayHandle(), 'however long the first took').toBe(false)
    expect(pending).toHaveLength(1)
    pending.shift()!()
    const handled: boolean[] = []
    for (let i = 0; i < 6; i++) {
      handled.push(turns.mayHandle())
      clock.advance(1)
    }
    expect(handled).toEqual([true, true, true, true, true, false])
    expect(pending).toHaveLength(1)
  })

  it('serves waiting connections a frame at a time, round robin, the one cut off first at the next turn', () => {
    const pending: (() => void)[] = []
    const clock = new ManualClock()
    // Frames of 2 ms, a budget of 5: three frames a turn (the third begins at 4 ms).
    const turns = new Turns(clock, 5, (f) => pending.push(f))
    const log: string[] = []
    // A flood of five frames and two of one frame each, one of them arriving later.
    turns.wait(waiter(turns, clock, 'flood', 5, log))
    turns.wait(waiter(turns, clock, 'a', 1, log))
    expect(pending).toHaveLength(1)
    pending.shift()!()
    const first = turns.now
    turns.wait(waiter(turns, clock, 'b', 1, log))
    // The flood's frame cut off goes first at the next turn; 'b', come since, behind it alone.
    while (pending.length > 0) pending.shift()!()
    const at = (turn: number, name: string) => `${first + turn}:${name}`
    expect(log).toEqual([
      at(0, 'flood'),
      at(0, 'a'),
      at(0, 'flood'),
      at(1, 'flood'),
      at(1, 'b'),
      at(1, 'flood'),
      at(2, 'flood'),
    ])
    expect(turns.waiting).toBe(0)
    expect(pending, 'no turn asked for once nothing waits').toHaveLength(0)
  })

  it('serves tenants in turn, then their connections: many connections buy no more turns', () => {
    const pending: (() => void)[] = []
    const clock = new ManualClock()
    const turns = new Turns(clock, 1000, (f) => pending.push(f))
    const log: string[] = []
    // A tenant with three flooding connections, then another tenant's one frame.
    for (const c of ['h1', 'h2', 'h3']) turns.wait(waiter(turns, clock, c, 3, log, 1, 'hostile'))
    turns.wait(waiter(turns, clock, 'honest', 1, log, 1, 'honest'))
    expect(turns.waiting).toBe(4)
    while (pending.length > 0) pending.shift()!()
    expect(log.map((l) => l.split(':')[1])).toEqual([
      'h1',
      'honest',
      'h2',
      'h3',
      'h1',
      'h2',
      'h3',
      'h1',
      'h2',
      'h3',
    ])
    expect(turns.waiting).toBe(0)
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
  // Every frame looks slow to the turns (10 ms of the loop's clock each): a turn handles one,
  // and every frame behind it in a burst waits for a later turn.
  let loopMs = 0
  const clock = new ManualClock()
  const server = await createCoordinator({
    config,
    host: '127.0.0.1',
    port: 0,
    clock,
    loopClock: { ...systemClock, now: () => (loopMs += 10) },
    logger: silentLogger,
  })
  running.push(server)
  const c = await TestClient.connect(server.wsUrl)
  clients.push(c)
  await c.hello('a')
  return { server, clock, c }
}

// The asks name a key of no family (`u/`): each is answered at once, refused (a key of k/*
// waits at the coordinator's part for its first share, on a clock these tests do not move).
const decidedIds = (c: TestClient): number[] =>
  c.received
    .filter((m): m is Extract<ServerMessage, { type: 'decided' }> => m.type === 'decided')
    .flatMap((m) => m.answers.map((a) => a[0]))

const burst = 40

describe('a connection’s frames past its share of a turn (ws-session.ts)', () => {
  it('are handled in order at later turns, and a ping after them is answered after them', async () => {
    const { c } = await start()
    for (let i = 0; i < burst; i++) c.send({ type: 'decide', asks: [[i, 'u/x', 1]] })
    // One round trip: every frame sent before the ping was handled (ws's automatic pong
    // would answer at once, before the frames that wait).
    await c.flush()
    expect(decidedIds(c)).toEqual(Array.from({ length: burst }, (_, i) => i))
  })

  it('wait behind one frame of each other connection, not behind all of a flood', async () => {
    const { server, c } = await start()
    const other = await TestClient.connect(server.wsUrl)
    clients.push(other)
    await other.hello('b')
    const flood = 400
    for (let i = 0; i < flood; i++) c.send({ type: 'decide', asks: [[i, 'u/f', 1]] })
    other.send({ type: 'decide', asks: [[0, 'u/o', 1]] })
    await other.flush()
    expect(decidedIds(other)).toEqual([0])
    // When the other's answer came, most of the flood was still waiting (one frame a turn
    // each: the other's came in among the flood's first).
    const floodAnsweredBefore = decidedIds(c).length
    expect(floodAnsweredBefore).toBeLessThan(flood / 2)
    await c.flush()
    expect(decidedIds(c)).toEqual(Array.from({ length: flood }, (_, i) => i))
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
    for (let i = 0; i < burst; i++) c.send({ type: 'decide', asks: [[i, 'u/y', 1]] })
    c.send({ type: 'release', resources: ['api'] })
    await c.close()
    await expect.poll(() => server.coordinator.view.committed('api')).toBe(0)
  })
})

/**
 * The least of a socket a session uses, to hold a hello in the turns' queue at the moment its
 * timer fires: over a real socket the wait lasts one turn of the loop, which no test can time.
 */
class HeldSocket extends EventEmitter {
  readyState: number = WebSocket.OPEN
  bufferedAmount = 0
  isPaused = false
  readonly sent: string[] = []
  closedWith: number | undefined
  send(text: string): void {
    this.sent.push(text)
  }
  close(code: number): void {
    this.closedWith = code
    this.readyState = WebSocket.CLOSED
  }
  terminate(): void {
    this.readyState = WebSocket.CLOSED
  }
  ping(): void {}
  pong(): void {}
  pause(): void {}
  resume(): void {}
}

describe('a hello that waits for its turn (a busy coordinator)', () => {
  const helloTimeoutMs = 500

  async function session(frame: object | undefined) {
    const { server, clock } = await startCoordinator(
      simpleConfig({}, { limits: { roundDebounceMs: 0, helloTimeoutMs } }),
    )
    running.push(server)
    // A turn already spent: the frame waits for the next, which runs when the test says.
    const loopClock = new ManualClock()
    const pending: (() => void)[] = []
    const turns = new Turns(loopClock, 5, (f) => pending.push(f))
    turns.mayHandle()
    loopClock.advance(10)
    const ws = new HeldSocket()
    const req = { headers: {}, socket: { remoteAddress: '127.0.0.1' } } as IncomingMessage
    new WsSession(ws as unknown as WebSocket, req, server.coordinator, clock, silentLogger, turns)
    if (frame !== undefined) ws.emit('message', Buffer.from(JSON.stringify(frame)), false)
    clock.advance(helloTimeoutMs)
    for (const next of pending.splice(0)) next()
    // The timer's verdict waits two turns of the loop (its reads of the sockets).
    for (let i = 0; i < 2; i++) await new Promise<void>((resolve) => nextTurn(resolve))
    return ws
  }

  it('is not timed out: it came in time, and is welcomed in turn', async () => {
    const ws = await session({ type: 'hello', v: 1, clientId: 'waited' })
    expect(ws.closedWith).toBeUndefined()
    expect(ws.sent.map((text) => (JSON.parse(text) as { type: string }).type)).toContain('welcome')
  })

  it('a connection that sent nothing is still closed with 4408 at helloTimeoutMs', async () => {
    const ws = await session(undefined)
    expect(ws.closedWith).toBe(4408)
  })
})
