import { randomUUID } from 'node:crypto'
import { mkdtemp, rm, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest'
import { createClient, type Resource, type SluiceClient } from '../../../client/index.js'
import { systemClock, type Timer } from '../../../shared/index.js'
import { EtcdServer } from '../../helpers/etcd.js'
import { Replica, assertBuilt } from '../../helpers/replica.js'
import { delay, waitFor } from '../../helpers/wait.js'

// Real etcd, real `sluice serve` processes, real sockets, real time: etcd's
// lease TTL runs on its own clock. Waits are upper bounds on events; failover
// times are measured in bench/failover.ts, not asserted here.

const capacity = 300
let etcd: EtcdServer
let dir: string | undefined
const replicas: Replica[] = []
const clients: SluiceClient[] = []
const timers: Timer[] = []

beforeAll(async () => {
  assertBuilt()
  etcd = await EtcdServer.create()
  dir = await mkdtemp(join(tmpdir(), 'sluice-ha-'))
})

afterAll(async () => {
  await etcd?.destroy()
  if (dir !== undefined) await rm(dir, { recursive: true, force: true })
})

afterEach(async () => {
  for (const t of timers.splice(0)) t.cancel()
  await Promise.all(clients.splice(0).map((c) => c.close()))
  await Promise.all(replicas.splice(0).map((r) => r.kill('SIGKILL')))
})

async function startReplicas(
  n: number,
  leaseTtlMs: number,
  heartbeatMs = 15_000,
): Promise<Replica[]> {
  const configPath = join(dir!, `${randomUUID()}.json`)
  await writeFile(
    configPath,
    JSON.stringify({
      server: {
        ha: { etcd: [etcd.clientUrl], name: `test-${randomUUID()}`, ttlSec: 2 },
        limits: { roundDebounceMs: 10, heartbeatMs },
        // Replicas share a holdings key, so a new leader restores what clients prove they hold.
        holdingsKey: { current: 'the replicas of this test share this key' },
      },
      resources: [
        {
          match: 'api',
          kind: 'rate',
          capacity,
          leaseTtlMs,
          refreshMs: 200,
          graceMs: 300,
        },
      ],
    }),
  )
  const started = await Promise.all(
    Array.from({ length: n }, () => Replica.spawn(['--config', configPath, '--port', '0'])),
  )
  replicas.push(...started)
  return started
}

async function leaders(among: readonly Replica[]): Promise<Replica[]> {
  const states = await Promise.all(among.map((r) => r.readiness()))
  return among.filter((_, i) => states[i]?.role === 'leader')
}

function oneLeader(among: readonly Replica[]): Promise<Replica> {
  return waitFor('exactly one leader', async () => {
    const found = await leaders(among)
    return found.length === 1 ? found[0] : undefined
  })
}

/** Clients that fall to 0 without a lease, so the sum of what they enforce is exact. */
function startClients(urls: readonly string[][], wants: readonly number[]): Resource[] {
  return wants.map((w, i) => {
    const client = createClient({
      url: urls[i]!,
      clientId: `client-${i}`,
      backoffBaseMs: 50,
      backoffCapMs: 500,
    })
    client.on('error', () => undefined)
    clients.push(client)
    return client.resource('api', { wants: w, failureMode: 'pessimistic' })
  })
}

/** Samples Σ enforced capacity on every lease and every 10 ms; returns the running maximum. */
function watchSum(resources: readonly Resource[]): { max: number } {
  const seen = { max: 0 }
  const sample = (): void => {
    let sum = 0
    for (const r of resources) sum += r.capacity
    seen.max = Math.max(seen.max, sum)
  }
  for (const r of resources) r.on('lease', sample)
  timers.push(systemClock.setInterval(sample, 10))
  return seen
}

function allLeased(resources: readonly Resource[], expected: readonly number[]): true | undefined {
  return resources.every((r, i) => r.mode === 'leased' && Math.abs(r.capacity - expected[i]!) < 1)
    ? true
    : undefined
}

describe('high availability on a real etcd', () => {
  it('replaces a killed leader: clients follow, grants resume, and Σ enforced never exceeds capacity', async () => {
    // Leases (5 s) outlive the etcd TTL (2 s): the new leader is elected while client-0 may still
    // use its lease, and only learning mode keeps it from granting that capacity twice.
    const group = await startReplicas(3, 5000)
    const first = await oneLeader(group)
    const followers = group.filter((r) => r !== first)
    const follower = await followers[0]!.readiness()
    expect(follower).toMatchObject({ ready: false, role: 'follower' })
    await waitFor('followers to know the leader', async () =>
      (await followers[0]!.readiness())?.leader === first.wsUrl ? true : undefined,
    )

    // Followers first in the URL list: every client starts with a redirect. client-0 knows only
    // the first leader: when it dies, client-0 is cut off, and keeps its lease until it lapses.
    const urls = [...followers.map((r) => r.wsUrl), first.wsUrl]
    const resources = startClients([[first.wsUrl], urls, urls], [50, 150, 200])
    const sum = watchSum(resources)
    // Max-min of 50, 150, 200 over 300.
    await waitFor('grants from the first leader', () => allLeased(resources, [50, 125, 125]))

    await first.kill('SIGKILL')
    const second = await oneLeader(followers)
    // The new leader must not grant client-0's 50 to the others while client-0 may still use it.
    const fresh = [true, false, false]
    resources.forEach((r, i) => r.on('lease', () => (fresh[i] = true)))
    const status = await waitFor('grants from the new leader', async () => {
      const res = await fetch(`${second.url}/v1/resources/api`)
      if (!res.ok) return undefined
      const body = (await res.json()) as {
        committed: number
        clientDetails: { id: string; lease: number }[]
      }
      const leases = Object.fromEntries(body.clientDetails.map((c) => [c.id, c.lease]))
      const granted = [150, 150].every((x, i) => Math.abs((leases[`client-${i + 1}`] ?? 0) - x) < 1)
      return granted && fresh.every(Boolean) && allLeased(resources.slice(1), [150, 150])
        ? body
        : undefined
    })
    expect(sum.max).toBeLessThanOrEqual(capacity + 1e-6)
    // The new leader resumed from the ledger the old one wrote to etcd: it did not learn.
    const ready = (await (await fetch(`${second.url}/readyz`)).json()) as { ledger: unknown }
    expect(ready.ledger).toEqual({ kind: 'etcd', started: 'restored' })
    expect(resources[0]!.mode).toBe('pessimistic')
    expect(sum.max).toBeGreaterThan(capacity - 1)
    expect(status.committed).toBeLessThanOrEqual(capacity + 1e-6)
    const metrics = await (await fetch(`${second.url}/metrics`)).text()
    expect(metrics).toMatch(/^sluice_leader 1$/m)
    expect(metrics).toMatch(/^sluice_role_changes_total\{to="leader"\} 1$/m)
  })

  it('a leader frozen past its etcd lease (SIGSTOP) sends nothing when it resumes: it steps down first', async () => {
    // Clients hear a silent coordinator only after 1.5 heartbeats (15 s here): the frozen leader's
    // client is still connected when it resumes, and its report from the pause is waiting.
    const group = await startReplicas(2, 5000, 10_000)
    const first = await oneLeader(group)
    const resources = startClients([[first.wsUrl]], [100])
    await waitFor('a grant', () => allLeased(resources, [capacity]))
    const leases: number[] = []
    resources[0]!.on('lease', () => leases.push(systemClock.now()))
    let sentAwayMs = Infinity
    clients[0]!.on('disconnect', () => (sentAwayMs = Math.min(sentAwayMs, systemClock.now())))

    first.child.kill('SIGSTOP')
    const frozenMs = systemClock.now()
    const second = await oneLeader(group.filter((r) => r !== first))
    expect(second).not.toBe(first)
    // Past the lease's whole commitment (5 s + 0.3 s + 2.5 s) on the frozen leader's books, so its
    // rounds, whose timers are due first when it wakes, would grant it afresh.
    await delay(Math.max(0, 8500 - (systemClock.now() - frozenMs)))
    const resumedMs = systemClock.now()
    first.child.kill('SIGCONT')
    await waitFor('the old leader to follow', async () =>
      (await first.readiness())?.role === 'follower' ? true : undefined,
    )
    await waitFor('the client to be sent away', () => (sentAwayMs < Infinity ? true : undefined))
    // Nothing from the old leader between its resuming and its sending the client away: not a
    // renewal, not a grant (what comes later comes from the new leader).
    expect(sentAwayMs).toBeGreaterThanOrEqual(resumedMs)
    expect(leases.filter((t) => t >= resumedMs && t <= sentAwayMs)).toEqual([])
  })

  it('steps the leader down when etcd is lost, and elects one leader again when it is back', async () => {
    const group = await startReplicas(3, 2000)
    await oneLeader(group)
    const resources = startClients([group.map((r) => r.wsUrl)], [100])
    await waitFor('a grant', () => allLeased(resources, [capacity]))

    await etcd.stop()
    // Keep-alives go unanswered: the leader steps down before its etcd lease can lapse (TTL 2 s).
    await waitFor('no leader', async () => ((await leaders(group)).length === 0 ? true : undefined))
    await waitFor('the client to lose its lease', () =>
      resources[0]!.mode === 'pessimistic' ? true : undefined,
    )

    await etcd.start()
    await oneLeader(group)
    for (let i = 0; i < 10; i++) {
      expect((await leaders(group)).length).toBeLessThanOrEqual(1)
      await delay(100)
    }
    await waitFor('a grant from the new leader', () => allLeased(resources, [capacity]))
  })
})
