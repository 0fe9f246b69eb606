import { hostname } from 'node:os'
import { afterEach, describe, expect, it } from 'vitest'
import { createClient, type Resource, type SluiceClient } from '../../client/index.js'
import { allocate } from '../../server/allocation/index.js'
import type { ConfigInput } from '../../server/config/index.js'
import { createCoordinator, type RunningCoordinator } from '../../server/index.js'
import { ManualClock } from '../../shared/index.js'
import { silentLogger, simpleConfig } from '../helpers/coordinator.js'

// A two-level tree on one manual clock, real sockets throughout: a root,
// downstream coordinators that are clients of the root, and their clients.

const clock = new ManualClock()
const servers: RunningCoordinator[] = []
const clients: SluiceClient[] = []

afterEach(async () => {
  await Promise.all(clients.splice(0).map((c) => c.close()))
  await Promise.all(
    servers
      .splice(0)
      .reverse()
      .map((s) => s.close()),
  )
})

/** The shared one-resource test config ('api', short periods, no learning) at `capacity`. */
function config(capacity: number, extra: Record<string, unknown> = {}): ConfigInput {
  return simpleConfig({ capacity, ...extra })
}

async function coordinator(input: ConfigInput, parent?: string): Promise<RunningCoordinator> {
  const server = await createCoordinator({
    config: input,
    host: '127.0.0.1',
    port: 0,
    clock,
    logger: silentLogger,
    parent: parent === undefined ? undefined : [parent],
  })
  servers.push(server)
  return server
}

function client(server: RunningCoordinator, id: string, wants: number, weight: number): Resource {
  const c = createClient({ url: server.wsUrl, clientId: id, clock, random: () => 0.5 })
  c.on('error', () => undefined)
  clients.push(c)
  return c.resource('api', { wants, weight, failureMode: 'pessimistic' })
}

/** Waits until every client and every downstream coordinator's link to its parent is connected. */
async function connected(): Promise<void> {
  const all = [...clients, ...servers.flatMap((s) => (s.parentClient ? [s.parentClient] : []))]
  await Promise.all(
    all
      .filter((c) => !c.connected)
      .map((c) => new Promise<void>((resolve) => c.once('connect', () => resolve()))),
  )
}

/** Moves time, then lets every connection (clients and downstream coordinators) exchange messages. */
async function step(ms: number): Promise<void> {
  clock.advance(ms)
  const all = [...clients, ...servers.flatMap((s) => (s.parentClient ? [s.parentClient] : []))]
  for (let i = 0; i < 3; i++) await Promise.all(all.map((c) => c.roundTrip()))
}

const spec = [
  { id: 'c1', down: 0, wants: 100, weight: 1 },
  { id: 'c2', down: 0, wants: 400, weight: 1 },
  { id: 'c3', down: 0, wants: 600, weight: 2 },
  { id: 'c4', down: 1, wants: 50, weight: 1 },
  { id: 'c5', down: 1, wants: 1000, weight: 3 },
  { id: 'c6', down: 1, wants: 300, weight: 1 },
]

describe('coordinator trees', () => {
  it('six clients under two downstream coordinators converge to the global weighted max-min shares', async () => {
    const root = await coordinator(config(1000))
    const downs = [
      await coordinator(config(1), root.wsUrl),
      await coordinator(config(1), root.wsUrl),
    ]
    const resources = spec.map((s) => client(downs[s.down]!, s.id, s.wants, s.weight))
    // The ideal: one weighted max-min over all six clients, as if there were no tree.
    const ideal = [
      ...allocate({
        capacity: 1000,
        surplus: 'hold',
        clients: spec.map((s) => ({ id: s.id, wants: s.wants, weight: s.weight })),
      }).grants,
    ]
    // Reporting plain sums of weights would give c2 114.8, not 121.4: the tree must do better.
    expect(ideal[1]).toBeCloseTo(850 / 7, 6)

    await connected()
    let maxRoot = 0
    let maxEnforced = 0
    // Twenty refresh periods: the weights settle within about ten.
    for (let t = 0; t < 2000; t += 50) {
      await step(50)
      maxRoot = Math.max(maxRoot, root.coordinator.view.committed('api'))
      maxEnforced = Math.max(
        maxEnforced,
        resources.reduce((sum, r) => sum + r.capacity, 0),
      )
    }
    const got = resources.map((r) => r.capacity)
    for (const [i, share] of ideal.entries()) expect(got[i]).toBeCloseTo(share, 0)
    expect(maxRoot).toBeLessThanOrEqual(1000 + 1e-6)
    expect(maxEnforced).toBeLessThanOrEqual(1000 + 1e-6)
    // The root sees two clients, the downstream coordinators.
    expect(root.coordinator.view.resource('api')!.clients).toBe(2)
  })

  it('leases granted downstream never outlive the parent lease, and follow the failure mode when the parent is gone', async () => {
    const root = await coordinator(config(1000, { leaseTtlMs: 600, refreshMs: 100 }))
    const down = await coordinator(
      config(1, { leaseTtlMs: 5000, refreshMs: 100, failureMode: 'pessimistic' }),
      root.wsUrl,
    )
    const r = client(down, 'c1', 300, 1)
    const grants: { ttlMs: number; capacity: number }[] = []
    r.on('lease', (g: { ttlMs: number; capacity: number }) => grants.push(g))
    await connected()
    for (let t = 0; t < 1000; t += 50) await step(50)
    expect(r.capacity).toBeCloseTo(300)
    // Local leases are 5 s, but the parent's are 0.6 s: each local one ends with the parent's.
    const positive = grants.filter((g) => g.capacity > 0)
    expect(positive.length).toBeGreaterThan(3)
    for (const g of positive) expect(g.ttlMs).toBeLessThanOrEqual(600)

    // The parent goes away: its lease lapses, the downstream falls to 0 (pessimistic), and so
    // does its client, no later than the parent's lease would have ended.
    const lastParentGrantMs = clock.now()
    await root.close()
    servers.splice(servers.indexOf(root), 1)
    for (let t = 0; t < 1000; t += 50) await step(50)
    expect(r.capacity).toBe(0)
    expect(down.coordinator.view.resource('api')?.capacity ?? 0).toBe(0)
    expect(clock.now() - lastParentGrantMs).toBeGreaterThan(600)
  })

  it('a downstream acknowledges a cut from its parent only once its own clients have taken it', async () => {
    const root = await coordinator(config(1000))
    const down = await coordinator(config(1), root.wsUrl)
    const below = client(down, 'below', 1000, 1)
    await connected()
    for (let t = 0; t < 1000; t += 50) await step(50)
    expect(below.capacity).toBeCloseTo(1000)

    // A client of the root itself: the root cuts the downstream to 500 to make room.
    const direct = client(root, 'direct', 1000, 1)
    let max = 0
    const sample = (): void => void (max = Math.max(max, below.capacity + direct.capacity))
    below.on('lease', sample)
    direct.on('lease', sample)
    await connected()
    for (let t = 0; t < 1000; t += 10) await step(10)
    expect(below.capacity).toBeCloseTo(500)
    expect(direct.capacity).toBeCloseTo(500)
    expect(max).toBeLessThanOrEqual(1000 + 1e-6)
  })
})

describe('a replicated downstream coordinator', () => {
  it('hands its parent link over with leadership: the old leader gives its lease back, the new one asks', async () => {
    const { ManualElection } = await import('../helpers/manual-election.js')
    const root = await coordinator(config(1000))
    const elections: InstanceType<typeof ManualElection>[] = []
    const replica = async (): Promise<RunningCoordinator> => {
      const server = await createCoordinator({
        config: config(1, { learningMs: 1200, unsafeLearning: true }),
        host: '127.0.0.1',
        port: 0,
        clock,
        logger: silentLogger,
        parent: [root.wsUrl],
        election: (url) => {
          const e = new ManualElection(url)
          elections.push(e)
          return e
        },
      })
      servers.push(server)
      return server
    }
    const a = await replica()
    const b = await replica()
    elections[0]!.elect()
    elections[1]!.announce(a.wsUrl)
    const c = createClient({ url: [a.wsUrl, b.wsUrl], clientId: 'c', clock, random: () => 0.5 })
    c.on('error', () => undefined)
    clients.push(c)
    const r = c.resource('api', { wants: 400, failureMode: 'pessimistic' })
    await connected()
    for (let t = 0; t < 3000; t += 50) await step(50)
    expect(r.capacity).toBeCloseTo(400)
    const rootClients = (): string[] => root.coordinator.view.clients('api').map((c) => c.id)
    expect(rootClients()).toEqual([`coordinator:${hostname()}:${a.port}`])

    elections[0]!.depose('test')
    elections[1]!.elect()
    elections[0]!.announce(b.wsUrl)
    let maxRoot = 0
    for (let t = 0; t < 4000; t += 50) {
      await step(50)
      maxRoot = Math.max(maxRoot, root.coordinator.view.committed('api'))
    }
    expect(r.capacity).toBeCloseTo(400)
    expect(rootClients()).toEqual([`coordinator:${hostname()}:${b.port}`])
    expect(maxRoot).toBeLessThanOrEqual(1000 + 1e-6)
  })
})
