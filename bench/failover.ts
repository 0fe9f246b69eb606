import { mkdtemp, rm, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { createClient, type Resource, type SluiceClient } from '../client/index.js'
import { systemClock } from '../shared/index.js'
import { EtcdServer } from '../test/helpers/etcd.js'
import { Replica, assertBuilt } from '../test/helpers/replica.js'
import { waitFor } from '../test/helpers/wait.js'
import { summarise } from './stats.js'

// Failover: three `sluice serve` replicas on a real etcd (lease TTL `ttlSec`), three clients.
// Each run kills the leader with SIGKILL and measures, from the kill, when a new leader answers
// /readyz, and when every client holds a lease the new leader granted (after its learning period).

interface Sample {
  electedMs: number
  grantsMs: number
}

async function once(etcd: EtcdServer, dir: string, run: number, ttlSec: number): Promise<Sample> {
  const configPath = join(dir, `failover-${run}.json`)
  await writeFile(
    configPath,
    JSON.stringify({
      server: {
        ha: { etcd: [etcd.clientUrl], name: `bench-${run}`, ttlSec },
        holdingsKey: { current: 'the replicas of this benchmark share this key' },
      },
      resources: [
        {
          match: 'api',
          kind: 'rate',
          capacity: 300,
          leaseTtlMs: 2000,
          refreshMs: 200,
          graceMs: 300,
        },
      ],
    }),
  )
  const replicas = await Promise.all(
    [0, 1, 2].map(() => Replica.spawn(['--config', configPath, '--port', '0'])),
  )
  const clients: SluiceClient[] = []
  try {
    const leaderOf = async (among: readonly Replica[]): Promise<Replica | undefined> => {
      const states = await Promise.all(among.map((r) => r.readiness()))
      const leaders = among.filter((_, i) => states[i]?.role === 'leader')
      return leaders.length === 1 ? leaders[0] : undefined
    }
    const first = await waitFor('a leader', () => leaderOf(replicas))
    const resources: Resource[] = [0, 1, 2].map((i) => {
      const c = createClient({
        url: replicas.map((r) => r.wsUrl),
        clientId: `c${i}`,
        backoffBaseMs: 50,
        backoffCapMs: 500,
      })
      c.on('error', () => undefined)
      clients.push(c)
      return c.resource('api', { wants: 100, failureMode: 'pessimistic' })
    })
    await waitFor('grants', () => (resources.every((r) => r.mode === 'leased') ? true : undefined))
    const fresh = resources.map(() => false)
    const killedMs = systemClock.now()
    await first.kill('SIGKILL')
    resources.forEach((r, i) => r.on('lease', () => (fresh[i] = true)))
    const others = replicas.filter((r) => r !== first)
    await waitFor('a new leader', () => leaderOf(others), 60_000, 10)
    const electedMs = systemClock.now() - killedMs
    for (const i of fresh.keys()) fresh[i] = false
    await waitFor(
      'grants from the new leader',
      () => (fresh.every(Boolean) && resources.every((r) => r.capacity > 0) ? true : undefined),
      60_000,
      10,
    )
    return { electedMs, grantsMs: systemClock.now() - killedMs }
  } finally {
    await Promise.all(clients.map((c) => c.close()))
    await Promise.all(replicas.map((r) => r.kill('SIGKILL')))
  }
}

/** Markdown rows: kill → new leader, kill → grants resume; median (min–max) over `runs`. */
export async function benchFailover(runs: number, ttlSec: number): Promise<string[]> {
  assertBuilt()
  const etcd = await EtcdServer.create()
  const dir = await mkdtemp(join(tmpdir(), 'sluice-failover-'))
  const samples: Sample[] = []
  try {
    for (let run = 0; run < runs; run++) samples.push(await once(etcd, dir, run, ttlSec))
  } finally {
    await etcd.destroy()
    await rm(dir, { recursive: true, force: true })
  }
  const row = (what: string, values: number[]): string => {
    const s = summarise(values)
    return `| ${what} | ${ttlSec} s | ${(s.median / 1000).toFixed(2)} s | ${(s.min / 1000).toFixed(2)}–${(s.max / 1000).toFixed(2)} s |`
  }
  return [
    row(
      'SIGKILL of the leader → a new leader answers /readyz',
      samples.map((s) => s.electedMs),
    ),
    row(
      'SIGKILL of the leader → every client holds a new lease (the new leader resumes from the ledger on etcd)',
      samples.map((s) => s.grantsMs),
    ),
  ]
}

/**
 * One coordinator with the embedded ledger (a file), three clients: SIGKILL, then a restart on
 * the same port and data directory. Times its start (spawned → listening), then, from the
 * restart, every client holding a lease the restarted coordinator sent, and a newcomer's first
 * grant (no learning period).
 */
async function restartOnce(
  dir: string,
  run: number,
): Promise<{ listeningMs: number; leasedMs: number; newcomerMs: number }> {
  const configPath = join(dir, `restart-${run}.json`)
  const dataDir = join(dir, `data-${run}`)
  await writeFile(
    configPath,
    JSON.stringify({
      resources: [
        {
          match: 'api',
          kind: 'rate',
          capacity: 300,
          leaseTtlMs: 2000,
          refreshMs: 200,
          graceMs: 300,
        },
      ],
    }),
  )
  const args = ['--config', configPath, '--port', '0', '--data-dir', dataDir]
  let replica = await Replica.spawn(args)
  const port = new URL(replica.url).port
  const clients: SluiceClient[] = []
  const start = (url: string, id: string, wants: number): Resource => {
    const c = createClient({ url, clientId: id, backoffBaseMs: 20, backoffCapMs: 100 })
    c.on('error', () => undefined)
    clients.push(c)
    return c.resource('api', { wants, failureMode: 'pessimistic' })
  }
  try {
    const resources = [0, 1, 2].map((i) => start(replica.wsUrl, `c${i}`, 50))
    // The first start in a data directory learns (3.3 s here); after it, grants.
    await waitFor(
      'grants',
      () => (resources.every((r) => r.mode === 'leased') ? true : undefined),
      30_000,
    )
    await replica.kill('SIGKILL')
    const fresh = resources.map(() => false)
    resources.forEach((r, i) => r.on('lease', () => (fresh[i] = true)))
    const spawnedMs = systemClock.now()
    replica = await Replica.spawn(['--config', configPath, '--port', port, '--data-dir', dataDir])
    const restartedMs = systemClock.now()
    const listeningMs = restartedMs - spawnedMs
    const newcomer = start(replica.wsUrl, 'newcomer', 50)
    let leasedMs = Infinity
    let newcomerMs = Infinity
    await waitFor(
      'grants from the restarted coordinator',
      () => {
        const now = systemClock.now() - restartedMs
        if (fresh.every(Boolean)) leasedMs = Math.min(leasedMs, now)
        if (newcomer.capacity > 0) newcomerMs = Math.min(newcomerMs, now)
        return Number.isFinite(leasedMs) && Number.isFinite(newcomerMs) ? true : undefined
      },
      30_000,
      5,
    )
    return { listeningMs, leasedMs, newcomerMs }
  } finally {
    await Promise.all(clients.map((c) => c.close()))
    await replica.kill('SIGKILL')
  }
}

/**
 * Markdown rows: a restarted process's start → listening; from listening, every client leased
 * anew, and a newcomer's first grant.
 */
export async function benchRestart(runs: number): Promise<string[]> {
  assertBuilt()
  const dir = await mkdtemp(join(tmpdir(), 'sluice-restart-'))
  const samples: { listeningMs: number; leasedMs: number; newcomerMs: number }[] = []
  try {
    for (let run = 0; run < runs; run++) samples.push(await restartOnce(dir, run))
  } finally {
    await rm(dir, { recursive: true, force: true })
  }
  const row = (what: string, values: number[]): string => {
    const s = summarise(values)
    return `| ${what} | — | ${(s.median / 1000).toFixed(2)} s | ${(s.min / 1000).toFixed(2)}–${(s.max / 1000).toFixed(2)} s |`
  }
  return [
    row(
      `a coordinator restarted: its process started → listening (Node ${process.versions.node}: its start, the modules, the ledger read)`,
      samples.map((s) => s.listeningMs),
    ),
    row(
      'SIGKILL and restart of one coordinator (file ledger) → every client holds a new lease',
      samples.map((s) => s.leasedMs),
    ),
    row(
      '… → a newcomer gets its first grant (no learning)',
      samples.map((s) => s.newcomerMs),
    ),
  ]
}
