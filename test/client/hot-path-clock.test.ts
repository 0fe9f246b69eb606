import { afterEach, describe, expect, it } from 'vitest'
import { createClient } from '../../client/index.js'
import { sharedCoarseClock, systemClock } from '../../shared/index.js'
import { Cluster, Load } from '../helpers/cluster.js'
import { simpleConfig } from '../helpers/coordinator.js'

const open: Array<{ close(): Promise<void> }> = []
afterEach(async () => {
  for (const o of open.splice(0).reverse()) await o.close()
})

describe("the client's hot-path clock", () => {
  it('is coarse by default and precise when a clock is injected; either may be chosen', async () => {
    const url = 'ws://127.0.0.1:9/v1/connect'
    const plain = createClient({ url, backoffBaseMs: 10_000 })
    open.push(plain)
    expect(plain.options.hotPathClock).toBe('coarse')
    const cluster = new Cluster()
    const injected = createClient({ url, clock: cluster.clock, backoffBaseMs: 10_000 })
    open.push(injected)
    expect(injected.options.hotPathClock).toBe('precise')
    expect(() => createClient({ url, hotPathClock: 'fast' as 'coarse' })).toThrow(
      /hotPathClock.*coarse.*precise/s,
    )
  })

  it('on the system clock, every client shares one coarse clock, and closing a client leaves it running', async () => {
    const url = 'ws://127.0.0.1:9/v1/connect'
    const one = createClient({ url, backoffBaseMs: 10_000 })
    const two = createClient({ url, backoffBaseMs: 10_000 })
    open.push(two)
    await one.close()
    const shared = sharedCoarseClock(systemClock)
    expect(shared).toBe(sharedCoarseClock(systemClock))
    shared.now() // a read wakes it if it idled; a closed clock would stay stopped
    expect(shared.running).toBe(true)
  })

  it('a coarse client admits its lease over real WebSockets: the full rate, never above rate·t + burst', async () => {
    const cluster = new Cluster()
    await cluster.start(simpleConfig({ capacity: 200, burst: 20 }))
    open.push(cluster)
    const client = await cluster.client('alpha', { hotPathClock: 'coarse' })
    const api = client.resource('api', { wants: 200 })
    for (let i = 0; i < 5; i++) await cluster.step(100)
    expect(api.lease?.capacity).toBe(200)
    await cluster.step(1000) // the bucket fills to its burst
    // 400/s asked of 200/s, 10 s, in 100 ms steps (the coarse clock ticks every ms in each).
    const load = new Load(api, 400)
    for (let i = 0; i < 100; i++) {
      load.tick(100)
      await cluster.step(100)
    }
    expect(load.admitted).toBeLessThanOrEqual(200 * 10 + 20)
    expect(load.admitted).toBeGreaterThanOrEqual(200 * 10 * 0.97)
  })
})
