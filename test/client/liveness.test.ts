import { once } from 'node:events'
import { afterEach, describe, expect, it } from 'vitest'
import { TcpProxy } from '../../bench/faults/proxy.js'
import { createClient, type SluiceClient } from '../../client/index.js'
import type { RunningCoordinator } from '../../server/index.js'
import { ManualClock } from '../../shared/index.js'
import { simpleConfig, startCoordinator } from '../helpers/coordinator.js'

// A real coordinator and client on one manual clock, through a real TCP proxy that can black-hole
// the connection: the connection stays up, and nothing (not even a reset) passes.

const closers: Array<() => Promise<unknown>> = []
afterEach(async () => {
  for (const close of closers.splice(0).reverse()) await close()
})

async function setup(heartbeatMs: number) {
  const clock = new ManualClock()
  const { server } = await startCoordinator(
    simpleConfig({}, { limits: { roundDebounceMs: 0, heartbeatMs } }),
    clock,
  )
  closers.push(() => server.close())
  const proxy = await TcpProxy.start(server.port)
  closers.push(() => proxy.close())
  const client = createClient({
    url: `ws://127.0.0.1:${proxy.port}/v1/connect`,
    clientId: 'c',
    clock,
    random: () => 0.5,
    backoffBaseMs: 50,
    backoffCapMs: 200,
    connectTimeoutMs: 1000,
  })
  client.on('error', () => undefined)
  closers.push(() => client.close())
  return { clock, server, proxy, client }
}

/** Lets real I/O run between clock steps. */
async function io(server: RunningCoordinator, client: SluiceClient): Promise<void> {
  await fetch(`${server.url}/healthz`)
  if (client.connected) await Promise.race([client.roundTrip(), fetch(`${server.url}/healthz`)])
}

describe('client liveness', () => {
  it('notices a black-holed connection within two heartbeats, and reconnects once the path is back', async () => {
    const heartbeatMs = 1000
    const { clock, server, proxy, client } = await setup(heartbeatMs)
    const api = client.resource('api', { wants: 100 })
    await once(client, 'connect')
    for (let t = 0; t < 300 && api.mode !== 'leased'; t += 50) {
      clock.advance(50)
      await io(server, client)
    }
    expect(api.mode).toBe('leased')

    proxy.set('stalled')
    const stalledAt = clock.now()
    let noticedAt: number | undefined
    client.once('disconnect', () => (noticedAt = clock.now()))
    for (let t = 0; t < 3 * heartbeatMs && noticedAt === undefined; t += 50) {
      clock.advance(50)
      await fetch(`${server.url}/healthz`)
    }
    expect(noticedAt).toBeDefined()
    expect(noticedAt! - stalledAt).toBeLessThanOrEqual(2 * heartbeatMs)

    proxy.set('open')
    for (let t = 0; t < 2000 && !client.connected; t += 50) {
      clock.advance(50)
      await fetch(`${server.url}/healthz`)
    }
    expect(client.connected).toBe(true)
  })

  it('gives up on a handshake that is never welcomed, after connectTimeoutMs', async () => {
    const { clock, server, proxy, client } = await setup(1000)
    await once(client, 'connect')
    proxy.set('stalled')
    let closes = 0
    client.on('disconnect', () => closes++)
    // Drop the live connection, then every attempt lands in the black hole.
    for (let t = 0; t < 6000; t += 50) {
      clock.advance(50)
      await fetch(`${server.url}/healthz`)
    }
    expect(closes).toBe(1)
    expect(client.connected).toBe(false)
    // Each attempt is dropped after connectTimeoutMs (1000) and retried after a backoff (≤ 200).
    expect(proxy.accepted).toBeGreaterThanOrEqual(4)
    proxy.set('open')
    for (let t = 0; t < 3000 && !client.connected; t += 50) {
      clock.advance(50)
      await fetch(`${server.url}/healthz`)
    }
    expect(client.connected).toBe(true)
  })

  it('closes within a second of its clock when the coordinator never answers the close', async () => {
    const { clock, server, proxy, client } = await setup(60_000)
    await once(client, 'connect')
    proxy.set('stalled')
    let closed = false
    const closing = client.close().then(() => (closed = true))
    // ws waits 30 s for the coordinator's half of the closing handshake; ours, one second.
    for (let t = 0; t < 950; t += 50) {
      clock.advance(50)
      await fetch(`${server.url}/healthz`)
    }
    expect(closed).toBe(false)
    for (let t = 0; t < 200 && !closed; t += 50) {
      clock.advance(50)
      await fetch(`${server.url}/healthz`)
    }
    await closing
    expect(closed).toBe(true)
    expect(client.connected).toBe(false)
  })
})
