import { once } from 'node:events'
import { mkdtemp, rename, rm, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { describe, expect, it } from 'vitest'
import { closedAfterEach, simpleConfig, startCoordinator } from '../../helpers/coordinator.js'
import { TestClient } from '../../helpers/ws-client.js'

const { running, clients } = closedAfterEach()

const adminToken = 'admin-token-123'

async function startWithClients() {
  const started = await startCoordinator(
    simpleConfig({}, { adminToken, limits: { roundDebounceMs: 0 } }),
  )
  running.push(started.server)
  for (const [id, wants] of [
    ['a', 50],
    ['b', 400],
  ] as const) {
    const c = await TestClient.connect(started.server.wsUrl)
    clients.push(c)
    await c.hello(id)
    c.send({ type: 'demand', resources: [{ resource: 'api', wants }] })
    await c.flush()
  }
  started.clock.advance(0)
  for (const c of clients) await c.nextLease('api')
  return started
}

describe('HTTP API', () => {
  it('answers /healthz and /readyz', async () => {
    const { server } = await startWithClients()
    expect((await server.http.inject('/healthz')).json()).toEqual({ status: 'ok' })
    const ready = await server.http.inject('/readyz')
    expect(ready.statusCode).toBe(200)
    expect(ready.json()).toMatchObject({ ready: true, learning: [], learningCount: 0 })
  })

  it('lists every resource with capacity, committed, free, demand, clients and learning', async () => {
    const { server } = await startWithClients()
    const body = (await server.http.inject('/v1/resources')).json()
    expect(body.resources).toEqual([
      {
        id: 'api',
        kind: 'rate',
        capacity: 300,
        committed: 300,
        free: 0,
        demand: 450,
        clients: 2,
        learning: false,
        rounds: 1,
        // These raw test clients report no usage.
        admittedPerSec: 0,
        refusedPerSec: 0,
        utilisation: 0,
        waiting: 0,
        inFlight: 0,
        refusing: 0,
      },
    ])
  })

  it('details a resource per client: wants, estimate, target, committed, weight, priority, tenant, lease age', async () => {
    const { server, clock } = await startWithClients()
    clock.advance(40)
    const body = (await server.http.inject('/v1/resources/api')).json()
    const byId = Object.fromEntries(body.clientDetails.map((c: { id: string }) => [c.id, c]))
    expect(byId.a).toMatchObject({
      wants: 50,
      estimatedDemand: 50,
      target: 50,
      committed: 50,
      weight: 1,
      priority: 0,
      tenant: null,
      leaseAgeMs: 40,
    })
    expect(byId.b).toMatchObject({ wants: 400, target: 250, committed: 250 })
  })

  it('answers 404 with a coded body for an unknown resource or route', async () => {
    const { server } = await startWithClients()
    const missing = await server.http.inject('/v1/resources/nope')
    expect(missing.statusCode).toBe(404)
    expect(missing.json().error.code).toBe('SLUICE_ERR_HTTP_NOT_FOUND')
    expect((await server.http.inject('/v2/whatever')).statusCode).toBe(404)
  })

  it('exposes Prometheus metrics per resource', async () => {
    const { server } = await startWithClients()
    const res = await server.http.inject('/metrics')
    expect(res.headers['content-type']).toContain('text/plain')
    expect(res.body).toContain('sluice_resource_capacity{resource="api"} 300')
    expect(res.body).toContain('sluice_resource_committed{resource="api"} 300')
    expect(res.body).toContain('sluice_resource_free{resource="api"} 0')
    expect(res.body).toContain('sluice_resource_demand{resource="api"} 450')
    expect(res.body).toContain('sluice_resource_grant{resource="api"} 300')
    expect(res.body).toMatch(/sluice_rounds_total\{resource="api"\} 1/)
    expect(res.body).toContain('sluice_connections 2')
    expect(res.body).toMatch(/sluice_lease_messages_total \d+/)
  })

  it('has a series for each named resource of the config before any client uses it', async () => {
    const started = await startCoordinator({
      server: { limits: { roundDebounceMs: 0 } },
      resources: [
        { match: 'api', kind: 'rate', capacity: 300 },
        { match: 'db', kind: 'concurrency', capacity: 20 },
        { match: 'tenant/*', kind: 'rate', capacity: 10 },
      ],
    })
    running.push(started.server)
    const body = (await started.server.http.inject('/metrics')).body
    expect(body).toContain('sluice_resource_capacity{resource="api"} 300')
    expect(body).toContain('sluice_resource_capacity{resource="db"} 20')
    expect(body).toContain('sluice_resource_clients{resource="api"} 0')
    expect(body).toContain('sluice_resource_committed{resource="db"} 0')
    // A pattern names no resource until one is used.
    expect(body).not.toContain('resource="tenant/*"')
    expect(body).toContain('sluice_resources 2')
  })

  it('refuses admin routes without the admin token', async () => {
    const { server } = await startWithClients()
    const none = await server.http.inject({ method: 'POST', url: '/v1/admin/reload' })
    expect(none.statusCode).toBe(401)
    expect(none.json().error.code).toBe('SLUICE_ERR_HTTP_UNAUTHORIZED')
    const wrong = await server.http.inject({
      method: 'POST',
      url: '/v1/admin/reload',
      headers: { authorization: 'Bearer nope-nope-nope' },
    })
    expect(wrong.statusCode).toBe(401)
  })

  it('reloads a config from the admin API and shrinks leases through the safe path on a capacity cut', async () => {
    const { server, clock } = await startWithClients()
    const next = simpleConfig({ capacity: 100 }, { adminToken, limits: { roundDebounceMs: 0 } })
    const res = await server.http.inject({
      method: 'POST',
      url: '/v1/admin/reload',
      headers: { authorization: `Bearer ${adminToken}` },
      payload: next,
    })
    expect(res.json()).toEqual({ reloaded: true, resources: 1, tenants: 0 })
    clock.advance(0)
    // a (50) keeps its share; b is cut from 250 to 50.
    const b = clients[1]!
    const cut = await b.next((m) => m.type === 'lease' && m.leases[0]!.capacity === 50)
    // Nothing is freed until the cut is acknowledged or lapses: committed stays 300, no grant goes negative.
    expect(server.coordinator.view.committed('api')).toBe(300)
    b.send({ type: 'ack', seq: (cut as { seq: number }).seq })
    await b.flush()
    expect(server.coordinator.view.committed('api')).toBe(100)
  })

  it('refuses an invalid config with a message naming the field, and keeps the old one', async () => {
    const { server } = await startWithClients()
    const res = await server.http.inject({
      method: 'POST',
      url: '/v1/admin/reload',
      headers: { authorization: `Bearer ${adminToken}` },
      payload: { resources: [{ match: 'api', kind: 'rate', capacity: -5 }] },
    })
    expect(res.statusCode).toBe(400)
    expect(res.json().error.code).toBe('SLUICE_ERR_CONFIG_INVALID')
    expect(res.json().error.message).toContain('resources[0].capacity')
    expect(server.coordinator.config.resources[0]!.capacity).toBe(300)
  })
  it('reloads from a YAML body, naming the line of a bad field', async () => {
    const { server } = await startWithClients()
    const head = `server: { adminToken: ${adminToken} }\nresources:\n`
    const yaml = `${head}  - { match: api, kind: rate, capacity: 120 }\n`
    const ok = await server.http.inject({
      method: 'POST',
      url: '/v1/admin/reload',
      headers: { authorization: `Bearer ${adminToken}`, 'content-type': 'application/yaml' },
      payload: yaml,
    })
    expect(ok.statusCode).toBe(200)
    expect(server.coordinator.config.resources[0]!.capacity).toBe(120)
    const bad = await server.http.inject({
      method: 'POST',
      url: '/v1/admin/reload',
      headers: { authorization: `Bearer ${adminToken}`, 'content-type': 'text/yaml' },
      payload: `${head}  - { match: api, kind: rate, capacity: lots }\n`,
    })
    expect(bad.statusCode).toBe(400)
    expect(bad.json().error.code).toBe('SLUICE_ERR_CONFIG_INVALID')
    expect(bad.json().error.message).toMatch(/resources\[0\]\.capacity/)
    expect(bad.json().error.message).toMatch(/line 3/)
    expect(server.coordinator.config.resources[0]!.capacity).toBe(120)
  })

  it('lists a configured resource before any client uses it, and the glob templates', async () => {
    const { server } = await startCoordinator({
      resources: [
        { match: 'payments', kind: 'concurrency', capacity: 20 },
        { match: 'tenant-*', kind: 'rate', capacity: 50 },
      ],
    })
    running.push(server)
    const body = (await server.http.inject('/v1/resources')).json()
    expect(body.resources).toEqual([
      expect.objectContaining({
        id: 'payments',
        kind: 'concurrency',
        capacity: 20,
        committed: 0,
        free: 20,
        clients: 0,
      }),
    ])
    expect(body.templates).toEqual([{ match: 'tenant-*', kind: 'rate', capacity: 50 }])
  })
})

describe('config file reload', () => {
  it('reloads when the file changes, and keeps the old config when the new file is invalid', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'sluice-'))
    const file = join(dir, 'sluice.yaml')
    await writeFile(file, 'resources:\n  - { match: api, kind: rate, capacity: 300 }\n')
    const { server, clock } = await startCoordinator(file)
    running.push(server)

    const changed = once(server.events, 'config-file-changed')
    await writeFile(file, 'resources:\n  - { match: api, kind: rate, capacity: 120 }\n')
    await changed
    const applied = once(server.events, 'config-applied')
    clock.advance(200)
    await applied
    expect(server.coordinator.config.resources[0]!.capacity).toBe(120)

    const changedAgain = once(server.events, 'config-file-changed')
    await writeFile(file, 'resources:\n  - { match: api, kind: rate, capacity: lots }\n')
    await changedAgain
    const rejected = once(server.events, 'config-rejected')
    clock.advance(200)
    const [error] = (await rejected) as [Error]
    expect(error.message).toContain('resources[0].capacity')
    expect(server.coordinator.config.resources[0]!.capacity).toBe(120)
  })

  it('keeps hearing the file when it is replaced by rename, and when it is deleted and created again', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'sluice-'))
    const file = join(dir, 'sluice.yaml')
    await writeFile(file, 'resources:\n  - { match: api, kind: rate, capacity: 300 }\n')
    const { server, clock } = await startCoordinator(file)
    running.push(server)
    const capacity = (): number => server.coordinator.config.resources[0]!.capacity

    // Write a temporary file and rename it over the config, as editors and ConfigMaps do.
    for (const next of [120, 90, 60]) {
      const changed = once(server.events, 'config-file-changed')
      const temp = join(dir, `.sluice.yaml.${next}.tmp`)
      await writeFile(temp, `resources:\n  - { match: api, kind: rate, capacity: ${next} }\n`)
      await rename(temp, file)
      await changed
      const applied = once(server.events, 'config-applied')
      clock.advance(200)
      await applied
      expect(capacity()).toBe(next)
    }

    const removed = once(server.events, 'config-file-changed')
    await rm(file)
    await removed
    clock.advance(200)
    const created = once(server.events, 'config-file-changed')
    await writeFile(file, 'resources:\n  - { match: api, kind: rate, capacity: 45 }\n')
    await created
    const applied = once(server.events, 'config-applied')
    clock.advance(200)
    await applied
    expect(capacity()).toBe(45)
  })
})
