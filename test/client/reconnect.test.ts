import { EventEmitter } from 'node:events'
import { afterEach, describe, expect, it } from 'vitest'
import { WebSocketServer } from 'ws'
import { ManualClock, createClient } from '../../client/index.js'
import { socketStates, webSocketFactory, type ClientSocket } from '../../client/socket.js'
import type { ConfigInput } from '../../server/config/index.js'
import { Cluster, Load } from '../helpers/cluster.js'
import { simpleConfig, startCoordinator } from '../helpers/coordinator.js'

const config = (learningMs = 0): ConfigInput => ({
  // A restarted coordinator restores what clients hold only when their proofs verify.
  server: {
    limits: { roundDebounceMs: 0 },
    holdingsKey: { current: 'a test holdings key, 32 chars or more' },
  },
  resources: [
    {
      match: 'api',
      kind: 'rate',
      capacity: 300,
      leaseTtlMs: 1000,
      refreshMs: 100,
      graceMs: 200,
      learningMs,
      unsafeLearning: true,
    },
  ],
})

let cluster: Cluster | undefined
const extra: Array<() => Promise<unknown>> = []
afterEach(async () => {
  for (const e of extra.splice(0)) await e()
  await cluster?.close()
  cluster = undefined
})

describe('client reconnects', () => {
  it('rebuilds a restarted coordinator from the holdings clients report in their hello, staying leased throughout', async () => {
    cluster = new Cluster()
    await cluster.start(config())
    const resources = await Promise.all(
      ['a', 'b', 'c'].map(async (id) => (await cluster!.client(id)).resource('api')),
    )
    const loads = resources.map((r) => new Load(r, 400))
    for (let t = 0; t < 300; t += 10) {
      for (const l of loads) l.tick(10)
      await cluster.step(10)
    }
    expect(resources.map((r) => r.lease?.capacity)).toEqual([100, 100, 100])

    const port = cluster.port
    await cluster.stop()
    await cluster.start(config(500), port)
    await cluster.reconnected()
    // The new coordinator learned what each client holds: all of capacity, nothing granted twice.
    expect(cluster.committed('api')).toBe(300)
    expect(resources.map((r) => r.mode)).toEqual(['leased', 'leased', 'leased'])
    for (let t = 0; t < 800; t += 10) {
      for (const l of loads) l.tick(10)
      await cluster.step(10)
      expect(cluster.committed('api')).toBeLessThanOrEqual(300)
    }
    expect(resources.map((r) => r.mode)).toEqual(['leased', 'leased', 'leased'])
    expect(resources.map((r) => r.lease?.capacity)).toEqual([100, 100, 100])
  })

  it('follows a redirect to another coordinator', async () => {
    cluster = new Cluster()
    await cluster.start(config())
    // A follower that knows the leader: answers every hello with a redirect.
    const follower = new WebSocketServer({ host: '127.0.0.1', port: 0 })
    extra.push(() => new Promise((resolve) => follower.close(resolve)))
    await new Promise((resolve) => follower.once('listening', resolve))
    follower.on('connection', (ws) => {
      ws.on('message', () => {
        ws.send(JSON.stringify({ type: 'redirect', url: cluster!.server.wsUrl }))
        ws.close(1000)
      })
    })
    const address = follower.address() as { port: number }
    const client = createClient({
      url: `ws://127.0.0.1:${address.port}/v1/connect`,
      clientId: 'r',
      clock: cluster.clock,
    })
    cluster.clients.push(client)
    const api = client.resource('api')
    await cluster.reconnected()
    await cluster.step(0)
    await cluster.step(0)
    expect(api.lease?.capacity).toBe(300)
  })

  it('frees its capacity at the coordinator at once on close()', async () => {
    cluster = new Cluster()
    await cluster.start(config())
    const a = await cluster.client('a')
    const b = await cluster.client('b')
    const ra = a.resource('api')
    b.resource('api')
    for (let t = 0; t < 200; t += 10) {
      new Load(ra, 1000).tick(10)
      await cluster.step(10)
    }
    expect(cluster.committed('api')).toBeGreaterThan(0)
    await a.close()
    cluster.clients.splice(cluster.clients.indexOf(a), 1)
    await b.roundTrip()
    const left = cluster.server.coordinator.view.clients('api').map((c) => c.id)
    expect(left.includes('a')).toBe(false)
    await expect(ra.acquire()).rejects.toMatchObject({ code: 'SLUICE_ERR_CLIENT_CLOSED' })
  })

  /**
   * A coordinator that welcomes each connection and closes it at once with `code`, counting
   * connections; the client on a manual clock, full jitter pinned to its top (delays 100, 200,
   * 400, 800, 1600, 1600 ms).
   */
  async function closedAtOnce(code: number, reason: string) {
    const server = new WebSocketServer({ host: '127.0.0.1', port: 0 })
    extra.push(() => new Promise((resolve) => server.close(resolve)))
    await new Promise((resolve) => server.once('listening', resolve))
    let connections = 0
    server.on('connection', (ws) => {
      connections++
      ws.on('message', (data: Buffer) => {
        const msg = JSON.parse(data.toString()) as { type: string; clientId: string }
        if (msg.type !== 'hello') return
        ws.send(
          JSON.stringify({
            type: 'welcome',
            v: 1,
            clientId: msg.clientId,
            learningMs: 0,
            heartbeatMs: 60_000,
          }),
        )
        ws.close(code, reason)
      })
    })
    const port = (server.address() as { port: number }).port
    const clock = new ManualClock()
    const client = createClient({
      url: `ws://127.0.0.1:${port}/v1/connect`,
      clientId: 'x',
      clock,
      random: () => 1,
      backoffBaseMs: 100,
      backoffCapMs: 1600,
    })
    const errors: string[] = []
    client.on('error', (e) => errors.push(e.code))
    extra.push(() => client.close())
    // The loopback makes progress between steps through a real request to the same server.
    const poke = (): Promise<unknown> => fetch(`http://127.0.0.1:${port}/`).catch(() => undefined)
    const run = async (forMs: number): Promise<void> => {
      for (let t = 0; t < forMs; t += 50) {
        clock.advance(50)
        for (let i = 0; i < 3; i++) await poke()
      }
    }
    return { client, errors, run, connections: () => connections }
  }

  it('reconnects after a close for one frame it sent (4413), surfacing it, with a backoff a welcome does not reset', async () => {
    const { client, errors, run, connections } = await closedAtOnce(
      4413,
      'SLUICE_ERR_PROTO_FRAME_TOO_LARGE',
    )
    await run(5000)
    // Growing: attempts at 0, 0.1, 0.3, 0.7, 1.5, 3.1 and 4.7 s. A welcome that reset the
    // backoff would make it one every 100 ms (about 50).
    expect(connections()).toBeGreaterThanOrEqual(5)
    expect(connections()).toBeLessThanOrEqual(9)
    expect(client.failure).toBeUndefined()
    expect(errors).toContain('SLUICE_ERR_PROTO_FRAME_TOO_LARGE')
  })

  it('stops for good only on a real protocol mismatch (4406)', async () => {
    const { client, run, connections } = await closedAtOnce(4406, 'SLUICE_ERR_PROTO_VERSION')
    await run(3000)
    expect(connections()).toBe(1)
    expect(client.failure?.code).toBe('SLUICE_ERR_PROTO_VERSION')
  })
})

describe('a coordinator that refuses connections (restarting)', () => {
  it('is retried within backoffRefusedCapMs however long it refused, and the client is back as soon as it listens', async () => {
    const first = await startCoordinator(simpleConfig())
    const port = first.server.port
    const clock = new ManualClock()
    const welcomed = new EventEmitter()
    let welcomes = 0
    // Each attempt settles when its socket closes (refused: real I/O, awaited) or is welcomed.
    const attempts: Array<Promise<unknown>> = []
    const client = createClient({
      url: `ws://127.0.0.1:${port}/v1/connect`,
      clientId: 'refused',
      clock,
      random: () => 0.999,
      backoffBaseMs: 100,
      backoffCapMs: 10_000,
      backoffRefusedCapMs: 400,
      socketFactory: (url, headers, tls) => {
        const ws = webSocketFactory(url, headers, tls)
        attempts.push(
          new Promise((resolve) => {
            ws.on('close', resolve)
            welcomed.once('welcome', resolve)
          }),
        )
        return ws
      },
    })
    client.on('error', () => undefined)
    client.on('connect', () => {
      welcomes++
      welcomed.emit('welcome')
    })
    extra.push(() => client.close())
    await attempts[0]
    const lost = new Promise((resolve) => client.once('disconnect', resolve))
    await first.server.close()
    await lost
    const step = async (): Promise<void> => {
      const before = attempts.length
      clock.advance(50)
      if (attempts.length > before) await attempts.at(-1)
    }
    // 10 s of a coordinator down: 100, 200, then 400 ms at most between attempts (the plain
    // backoff's 0.1, 0.2, 0.4, 0.8, 1.6, 3.2 and 6.4 s would make 7 in all).
    for (let t = 0; t < 10_000; t += 50) await step()
    expect(attempts.length).toBeGreaterThanOrEqual(24)
    // Back on the same port: the next attempt, within 400 ms, is welcomed.
    const second = await startCoordinator(simpleConfig(), new ManualClock(), port)
    extra.push(() => second.server.close())
    const backAtMs = clock.now()
    while (welcomes < 2 && clock.now() - backAtMs <= 1_000) await step()
    expect(welcomes).toBe(2)
    expect(clock.now() - backAtMs).toBeLessThanOrEqual(400)
  })
})

describe('a coordinator that accepts and then stays silent (behind)', () => {
  it('is given twice as long at each attempt, up to 8 times connectTimeoutMs, rather than dropped ever again at the same bound', async () => {
    // Accepts every connection and never answers: no welcome, no pong.
    const server = new WebSocketServer({ host: '127.0.0.1', port: 0, autoPong: false })
    extra.push(() => new Promise((resolve) => server.close(resolve)))
    await new Promise((resolve) => server.once('listening', resolve))
    const port = (server.address() as { port: number }).port
    const clock = new ManualClock()
    // Each attempt's socket, its open and its close (real I/O, awaited).
    const attempts: Array<{
      ws: ClientSocket
      opened: Promise<unknown>
      closed: Promise<unknown>
    }> = []
    const client = createClient({
      url: `ws://127.0.0.1:${port}/v1/connect`,
      clientId: 'behind',
      clock,
      random: () => 0,
      connectTimeoutMs: 1000,
      socketFactory: (url, headers, tls) => {
        const ws = webSocketFactory(url, headers, tls)
        attempts.push({
          ws,
          opened: new Promise((resolve) => ws.on('open', () => resolve(undefined))),
          closed: new Promise((resolve) => ws.once('close', () => resolve(undefined))),
        })
        return ws
      },
    })
    client.on('error', () => undefined)
    extra.push(() => client.close())
    const openedAt: number[] = []
    while (openedAt.length < 7) {
      const attempt = attempts.at(-1)!
      await attempt.opened
      openedAt.push(clock.now())
      // The clock runs until the attempt is dropped, then until the next one is made.
      while (attempt.ws.readyState === socketStates.open) clock.advance(50)
      await attempt.closed
      while (attempts.at(-1) === attempt) clock.advance(1)
    }
    const gapsMs = openedAt.slice(1).map((t, i) => t - openedAt[i]!)
    // Silence is judged every third of the bound: dropped between it and a third more (the
    // clock steps 50 ms, the backoff adds at most 1 ms). With one bound: 1 s every time.
    const boundsMs = [1000, 2000, 4000, 8000, 8000, 8000]
    gapsMs.forEach((gapMs, i) => {
      expect(gapMs).toBeGreaterThanOrEqual(boundsMs[i]!)
      expect(gapMs).toBeLessThanOrEqual((boundsMs[i]! * 4) / 3 + 60)
    })
    expect(client.failure).toBeUndefined()
  })
})
