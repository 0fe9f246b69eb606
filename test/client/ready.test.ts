import { createServer } from 'node:http'
import { afterEach, describe, expect, it } from 'vitest'
import { createClient, type SluiceClient } from '../../client/index.js'
import type { ConfigInput } from '../../server/config/index.js'
import type { RunningCoordinator } from '../../server/index.js'
import { ManualClock, type SluiceError } from '../../shared/index.js'
import { simpleConfig, startCoordinator } from '../helpers/coordinator.js'

// What a newcomer meets first: waiting for the first lease, and hearing what is wrong when
// something is (a wrong URL, token or resource id), against a real coordinator.

const closers: Array<() => Promise<unknown>> = []
afterEach(async () => {
  for (const c of closers.splice(0).reverse()) await c()
})

async function coordinator(
  server: Record<string, unknown> = {},
  tenants?: Record<string, unknown>,
) {
  const clock = new ManualClock()
  const config = {
    ...simpleConfig({}, { limits: { roundDebounceMs: 0 }, ...server }),
    ...(tenants === undefined ? {} : { tenants }),
  } as ConfigInput
  const { server: s } = await startCoordinator(config, clock)
  closers.push(() => s.close())
  return { server: s, clock }
}

function client(
  url: string,
  clock: ManualClock,
  extra: Record<string, unknown> = {},
): SluiceClient {
  const c = createClient({ url, clock, backoffBaseMs: 10, backoffCapMs: 20, ...extra })
  closers.push(() => c.close())
  return c
}

/** Lets real I/O run while the manual clock moves, until `done` or the bound. */
async function until(
  server: RunningCoordinator,
  clock: ManualClock,
  done: () => boolean,
): Promise<void> {
  for (let i = 0; i < 200 && !done(); i++) {
    clock.advance(10)
    await fetch(`${server.url}/healthz`)
  }
}

describe('ready and errors', () => {
  it('ready() resolves at the first lease, so the first request is served', async () => {
    const { server, clock } = await coordinator()
    const c = client(server.wsUrl, clock)
    const api = c.resource('api', { wants: 100 })
    let ready = false
    const both = Promise.all([api.ready(), c.ready()]).then(() => (ready = true))
    await until(server, clock, () => ready)
    await both
    // Tokens are earned at the lease's rate from its arrival (never handed out unearned: that
    // would break the burst bound when shares move); at 100/s, 50 ms later there are five.
    clock.advance(50)
    expect(api.tryAcquire()).toBe(true)
  })

  it('acquire() called before the first lease waits for it instead of refusing', async () => {
    const { server, clock } = await coordinator()
    const c = client(server.wsUrl, clock)
    const api = c.resource('api', { wants: 100 })
    expect(api.lease).toBeUndefined()
    let admitted = false
    const waiting = api.acquire(1, { maxWaitMs: 1_500 }).then(() => (admitted = true))
    await until(server, clock, () => admitted)
    await waiting
    expect(api.lease?.capacity).toBeGreaterThan(0)
  })

  it('rejects ready() for a resource no template matches, naming the id, and stops asking for it', async () => {
    const { server, clock } = await coordinator()
    const c = client(server.wsUrl, clock)
    const errors: SluiceError[] = []
    c.on('error', (e: SluiceError) => errors.push(e))
    const typo = c.resource('apii')
    let refusal: SluiceError | undefined
    typo.ready().catch((e: SluiceError) => (refusal = e))
    await until(server, clock, () => refusal !== undefined)
    expect(refusal).toMatchObject({ code: 'SLUICE_ERR_RESOURCE_UNKNOWN', resource: 'apii' })
    expect(refusal!.message).toContain('"apii"')
    // Not asked for again every period: one error, however long it runs.
    for (let t = 0; t < 1000; t += 100) {
      clock.advance(100)
      await c.roundTrip()
    }
    expect(errors.filter((e) => e.code === 'SLUICE_ERR_RESOURCE_UNKNOWN')).toHaveLength(1)
  })

  it('stops at a wrong token: no retries, ready() rejects with the code and what to check', async () => {
    const { server, clock } = await coordinator({}, { a: { token: 'tenant-a-token' } })
    const c = client(server.wsUrl, clock, { token: 'not-the-token' })
    c.on('error', () => undefined)
    c.resource('api')
    let failure: SluiceError | undefined
    c.ready().catch((e: SluiceError) => (failure = e))
    await until(server, clock, () => failure !== undefined)
    expect(failure).toMatchObject({ code: 'SLUICE_ERR_AUTH_INVALID_TOKEN' })
    expect(failure!.message).toContain('check the token')
    const before = await server.coordinator.metrics.errors.get()
    const refusals = () =>
      before.values.find((v) => v.labels.code === 'SLUICE_ERR_AUTH_INVALID_TOKEN')?.value
    const first = refusals()
    for (let t = 0; t < 1000; t += 100) {
      clock.advance(100)
      await fetch(`${server.url}/healthz`)
    }
    const after = await server.coordinator.metrics.errors.get()
    expect(after.values.find((v) => v.labels.code === 'SLUICE_ERR_AUTH_INVALID_TOKEN')?.value).toBe(
      first,
    )
    expect(c.failure?.code).toBe('SLUICE_ERR_AUTH_INVALID_TOKEN')
  })

  it('stops at a URL with no coordinator behind it (HTTP 404), saying the path to use', async () => {
    const { server, clock } = await coordinator()
    const c = client(`ws://127.0.0.1:${server.port}/wrong`, clock)
    c.on('error', () => undefined)
    let failure: SluiceError | undefined
    c.ready().catch((e: SluiceError) => (failure = e))
    await until(server, clock, () => failure !== undefined)
    expect(failure).toMatchObject({ code: 'SLUICE_ERR_CLIENT_BAD_URL' })
    expect(failure!.message).toContain('/v1/connect')
  })

  it('says, without a listener or a logger, that it cannot reach the coordinator, and never throws', async () => {
    const clock = new ManualClock()
    const warnings: string[] = []
    const onWarning = (w: Error): void => void warnings.push(w.message)
    process.on('warning', onWarning)
    closers.push(async () => process.off('warning', onWarning))
    const c = client('ws://127.0.0.1:1/v1/connect', clock)
    c.resource('api')
    // Real I/O (a connection refused) between clock steps: a round trip to a local server paces it.
    const pacer = createServer((_req, res) => res.end())
    await new Promise<void>((resolve) => pacer.listen(0, '127.0.0.1', resolve))
    closers.push(() => new Promise((resolve) => pacer.close(resolve)))
    const pace = `http://127.0.0.1:${(pacer.address() as { port: number }).port}/`
    for (let i = 0; i < 200 && warnings.length === 0; i++) {
      clock.advance(20)
      await fetch(pace)
    }
    expect(warnings.join('\n')).toContain('ws://127.0.0.1:1/v1/connect')
    const ready = c.ready({ timeoutMs: 100 })
    clock.advance(200)
    await expect(ready).rejects.toMatchObject({ code: 'SLUICE_ERR_CLIENT_TIMEOUT' })
  })
})
