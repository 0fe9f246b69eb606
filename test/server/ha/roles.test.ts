import { afterEach, describe, expect, it } from 'vitest'
import { createClient, type Resource, type SluiceClient } from '../../../client/index.js'
import { runCli } from '../../../server/cli/index.js'
import { createCoordinator, type RunningCoordinator } from '../../../server/index.js'
import { ManualClock } from '../../../shared/index.js'
import { silentLogger, simpleConfig } from '../../helpers/coordinator.js'
import { ManualElection } from '../../helpers/manual-election.js'

// Roles on one manual clock with real sockets. The election is decided by the test; the real
// one (etcd) is exercised in etcd.test.ts.

const clock = new ManualClock()
const servers: RunningCoordinator[] = []
const clients: SluiceClient[] = []

afterEach(async () => {
  await Promise.all(clients.splice(0).map((c) => c.close()))
  await Promise.all(servers.splice(0).map((s) => s.close()))
})

async function replica(
  overrides: Record<string, unknown> = {},
): Promise<{ server: RunningCoordinator; election: ManualElection }> {
  let election!: ManualElection
  const server = await createCoordinator({
    // Replicas share a holdings key, so a new leader can verify what clients hold.
    config: simpleConfig(overrides, {
      limits: { roundDebounceMs: 0 },
      holdingsKey: { current: 'replicas share this holdings key, 32+' },
    }),
    host: '127.0.0.1',
    port: 0,
    clock,
    logger: silentLogger,
    election: (url) => (election = new ManualElection(url)),
  })
  servers.push(server)
  return { server, election }
}

function client(urls: string[], id: string): SluiceClient {
  const c = createClient({
    url: urls,
    clientId: id,
    clock,
    random: () => 0.5,
    backoffBaseMs: 100,
    backoffCapMs: 400,
  })
  c.on('error', () => undefined)
  clients.push(c)
  return c
}

/** Count of closes with `code` a coordinator caused. */
async function closes(server: RunningCoordinator, code: string): Promise<number> {
  const metric = await server.coordinator.metrics.errors.get()
  return metric.values.find((v) => v.labels.code === code)?.value ?? 0
}

/**
 * Lets real I/O run (bounded: a real HTTP request per turn) until `done`; the manual clock does
 * not move, so anything that happens here happens without waiting for a timer.
 */
async function progress(server: RunningCoordinator, done: () => Promise<boolean>, turns = 200) {
  for (let i = 0; i < turns; i++) {
    if (await done()) return
    await fetch(`${server.url}/healthz`)
  }
  throw new Error('condition not reached')
}

async function idle(server: RunningCoordinator, turns = 30): Promise<void> {
  for (let i = 0; i < turns; i++) await fetch(`${server.url}/healthz`)
}

describe('replica roles', () => {
  it('a follower that knows no leader sends clients away to retry after a jittered backoff, never at once', async () => {
    const { server, election } = await replica()
    expect(election.started).toBe(true)
    const res = await fetch(`${server.url}/readyz`)
    expect(res.status).toBe(503)
    expect(await res.json()).toMatchObject({ ready: false, role: 'follower', leader: null })

    client([server.wsUrl], 'c1')
    await progress(server, async () => (await closes(server, 'SLUICE_ERR_NO_LEADER')) === 1)
    await idle(server)
    expect(await closes(server, 'SLUICE_ERR_NO_LEADER')).toBe(1)
    // Backoff: 0.5 · min(400, 100·2^0) = 50 ms.
    clock.advance(49)
    await idle(server)
    expect(await closes(server, 'SLUICE_ERR_NO_LEADER')).toBe(1)
    clock.advance(1)
    await progress(server, async () => (await closes(server, 'SLUICE_ERR_NO_LEADER')) === 2)
  })

  it('a redirect loop between two followers is followed a few times, then only after backoffs', async () => {
    const a = await replica()
    const b = await replica()
    a.election.announce(b.server.wsUrl)
    b.election.announce(a.server.wsUrl)
    const redirects = async (): Promise<number> =>
      (await closes(a.server, 'SLUICE_ERR_NOT_LEADER')) +
      (await closes(b.server, 'SLUICE_ERR_NOT_LEADER'))

    client([a.server.wsUrl], 'c1')
    // The first answer and three redirects followed at once.
    await progress(a.server, async () => (await redirects()) === 4)
    await idle(a.server)
    expect(await redirects()).toBe(4)
    // From then on, one connection per backoff (at most 200 ms with this jitter): bounded by time.
    for (let i = 0; i < 10; i++) {
      clock.advance(200)
      await idle(a.server, 10)
    }
    const after = await redirects()
    expect(after).toBeGreaterThan(4)
    expect(after).toBeLessThanOrEqual(4 + 10)
  })

  it('a leader past its leadership deadline (a long pause) grants nothing: the first message or round after it steps it down', async () => {
    const a = await replica()
    a.election.elect()
    const c = client([a.server.wsUrl], 'c1')
    const r = c.resource('api', { wants: 100 })
    for (let t = 0; t < 400; t += 50) {
      clock.advance(50)
      await idle(a.server, 3)
      await c.roundTrip()
    }
    expect(r.mode).toBe('leased')
    const pushes = async (): Promise<number> =>
      (await a.server.coordinator.metrics.pushes.get()).values[0]!.value
    const before = await pushes()
    // The process was frozen past its deadline; its step-down timer has not run yet, but a report
    // arrives (the client's period is up): it must be answered with nothing but a send-off.
    a.election.deadlineMs = clock.now()
    clock.advance(100)
    await progress(a.server, async () => a.server.coordinator.role === 'follower')
    expect(await pushes()).toBe(before)
    expect(await closes(a.server, 'SLUICE_ERR_NO_LEADER')).toBeGreaterThanOrEqual(1)
  })

  it('hands over: the old leader sends clients on, the new one learns their holdings before granting', async () => {
    const config = {
      capacity: 300,
      leaseTtlMs: 1000,
      refreshMs: 100,
      graceMs: 200,
      safeHoldMs: 300,
      learningMs: 1500,
    }
    const a = await replica(config)
    const b = await replica(config)
    a.election.elect()
    b.election.announce(a.server.wsUrl)
    expect(a.server.coordinator.role).toBe('leader')
    // a's own learning period first.
    const urls = [a.server.wsUrl, b.server.wsUrl]
    const resources: Resource[] = []
    for (const [i, wants] of [100, 300].entries()) {
      resources.push(client(urls, `c${i}`).resource('api', { wants, failureMode: 'pessimistic' }))
    }
    let maxSum = 0
    const step = async (ms: number): Promise<void> => {
      clock.advance(ms)
      await idle(a.server, 5)
      await Promise.all(clients.map((c) => c.roundTrip()))
      maxSum = Math.max(maxSum, resources[0]!.capacity + resources[1]!.capacity)
    }
    for (let t = 0; t < 2000; t += 50) await step(50)
    expect(resources.map((r) => r.capacity)).toEqual([100, 200])

    // a loses leadership; b wins and a learns it.
    a.election.depose('lease lapsed')
    expect(a.server.coordinator.role).toBe('follower')
    b.election.elect()
    a.election.announce(b.server.wsUrl)
    b.election.announce(b.server.wsUrl)
    for (let t = 0; t < 600; t += 50) await step(50)
    // Clients are on b, still enforcing a's leases, and b counts them as committed.
    expect(clients.every((c) => c.connected)).toBe(true)
    expect(b.server.coordinator.view.committed('api')).toBeCloseTo(300)
    expect(a.server.coordinator.view.resources().length).toBe(0)
    for (let t = 0; t < 2000; t += 50) await step(50)
    expect(resources.map((r) => r.capacity)).toEqual([100, 200])
    expect(resources.every((r) => r.mode === 'leased')).toBe(true)
    expect(maxSum).toBeLessThanOrEqual(300 + 1e-9)
    const ready = (await (await fetch(`${a.server.url}/readyz`)).json()) as Record<string, unknown>
    expect(ready).toMatchObject({ role: 'follower', leader: b.server.wsUrl })
    let stdout = ''
    const io = {
      stdout: { write: (t: string) => void (stdout += t) },
      stderr: { write: () => true },
    }
    expect(await runCli(['status', '--url', a.server.url], io as never)).toBe(0)
    expect(stdout).toContain(`this replica follows; the leader is ${b.server.wsUrl}`)
  })
})
