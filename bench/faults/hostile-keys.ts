import { copyFile, mkdtemp, rm, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { CoordinatorProcess, freePort, sleep } from './harness.js'
import type { GatewayWorkerSpec } from './gateway-worker.js'
import type { HostileTenantSpec } from './hostile-tenant.js'
import type { TenantWorkerSpec } from './tenant-worker.js'
import { startWorker, type WorkerProcess } from './workers.js'

/**
 * Keyed families and quotas tried as an attacker, a hostile tenant and an
 * unlucky operator would, with real processes on loopback (issue #39): the
 * coordinator is `sluice serve`, every client a process of its own. Each
 * runner returns what the honest processes logged, so a test (and `npm run
 * faults -- hostile`) holds them to what a control run without the attack
 * gives.
 */

/** A coordinator on `config` in a directory of its own, and what to stop when done. */
async function coordinatorOn(config: unknown): Promise<{
  coordinator: CoordinatorProcess
  dir: string
  url: string
  done: (workers: readonly WorkerProcess[]) => Promise<void>
}> {
  const dir = await mkdtemp(join(tmpdir(), 'sluice-hostile-'))
  const configPath = join(dir, 'sluice.json')
  await writeFile(configPath, JSON.stringify(config))
  const coordinator = new CoordinatorProcess(configPath, await freePort())
  await coordinator.start()
  return {
    coordinator,
    dir,
    url: `ws://127.0.0.1:${coordinator.port}/v1/connect`,
    done: async (workers) => {
      for (const w of workers) if (w.child.exitCode === null) w.child.kill('SIGKILL')
      await coordinator.stop()
      if (process.env.SLUICE_FAULTS_KEEP === undefined)
        await rm(dir, { recursive: true, force: true })
    },
  }
}

/** The JSON lines a worker wrote. */
function lines<T>(w: WorkerProcess): T[] {
  return w.output
    .split('\n')
    .filter((l) => l.startsWith('{'))
    .map((l) => JSON.parse(l) as T)
}

// ---- 1. one HTTP caller with odd keys ----

export interface OddKeysResult {
  /** Honest requests (three keys, well within their limits) answered 200, of all sent. */
  readonly honestOk: number
  readonly honestSent: number
  /** The others, as `tick:status` (a tick is 100 ms). */
  readonly honestOther: readonly string[]
  /** Odd-key requests answered 400, of all sent. */
  readonly oddRefused: number
  readonly oddSent: number
  /** Times the gateway's client lost its connection, and the close codes. */
  readonly disconnects: readonly number[]
}

const short = { refreshMs: 500, leaseTtlMs: 2000, graceMs: 500, safeHoldMs: 1000 }

/**
 * A gateway process limited per `x-api-key` (10/s a key) and by a whole
 * `api` resource (300/s), as the docs build one; three honest callers at
 * 5/s each for 14 s; 3 s in, when `attack`, an anonymous caller sends what
 * broke a gateway before, each key 12 times (past its burst of 10, so the
 * gateway would report it): a key with a C1 control character, one of 1,100
 * characters, seventy distinct ones of 1,000, and `*`.
 */
export async function runOddKeys(attack = true): Promise<OddKeysResult> {
  const { url, done } = await coordinatorOn({
    server: { host: '127.0.0.1', limits: { heartbeatMs: 1000 } },
    resources: [
      // Short leases: a gateway whose connection is gone runs out of what it may admit in 3 s.
      { match: 'apikey/*', keyed: true, kind: 'rate', capacity: 10, ...short },
      { match: 'api', kind: 'rate', capacity: 300, ...short },
    ],
  })
  const spec: GatewayWorkerSpec = {
    url,
    clientId: 'gateway',
    prefix: 'apikey',
    resource: 'api',
    durationMs: 18_000,
  }
  const gateway = startWorker('gateway-worker', spec)
  try {
    let port: number | undefined
    for (let i = 0; i < 400 && port === undefined; i++) {
      port = lines<{ listening?: number }>(gateway).find(
        (l) => l.listening !== undefined,
      )?.listening
      if (port === undefined) await sleep(25)
    }
    if (port === undefined) throw new Error(`the gateway did not listen:\n${gateway.output}`)
    const get = (key: string): Promise<number> =>
      fetch(`http://127.0.0.1:${port}/v1/data`, { headers: { 'x-api-key': key } })
        .then(async (r) => {
          await r.arrayBuffer()
          return r.status
        })
        .catch(() => 0)
    const odd = attack
      ? [
          'bad\u0085key',
          'k'.repeat(1100),
          ...Array.from({ length: 70 }, (_, i) => `${i}-${'x'.repeat(1000)}`.slice(0, 1000)),
          '*',
        ].flatMap((k) => Array.from({ length: 12 }, () => k))
      : []
    // A second for the gateway to earn its keys' first tokens (a new key at a gateway that has
    // just joined earns them from its share's arrival: #41's to close), then 14 s of traffic.
    await sleep(1000)
    let honestOk = 0
    let honestSent = 0
    const honestOther: string[] = []
    let oddRefused = 0
    const startMs = Date.now()
    for (let tick = 0; Date.now() - startMs < 14_000; tick++) {
      const asks = tick % 2 === 0 ? ['alice', 'bob', 'carol'].map((k) => get(k)) : []
      if (tick === 30) {
        const answers = await Promise.all(odd.map((k) => get(k)))
        oddRefused += answers.filter((s) => s === 400).length
      }
      for (const status of await Promise.all(asks)) {
        honestSent++
        if (status === 200) honestOk++
        else honestOther.push(`${tick}:${status}`)
      }
      await sleep(startMs + (tick + 1) * 100 - Date.now())
    }
    const disconnects = lines<{ connected?: boolean; code?: number }>(gateway)
      .filter((l) => l.connected === false)
      .map((l) => l.code ?? 0)
    return { honestOk, honestSent, honestOther, oddRefused, oddSent: odd.length, disconnects }
  } finally {
    await done([gateway])
  }
}

// ---- 3, 4, 6. a hostile tenant beside an honest one ----

/** What tenant A does while tenant B's processes work. */
export type TenantAttack =
  /** Nothing: the control run. */
  | 'none'
  /** Keys of 1,000 characters (and 250) made hot in the family B uses too. */
  | 'long-hot-keys'
  /** Every hot-key slot asked for, from 4 connections. */
  | 'hot-slots'
  /** 10 connections reporting family traffic of 1e6 (the default-holder places by traffic). */
  | 'default-places'
  /** A report of used 1e15 of the quota B shares. */
  | 'inflated-used'

export interface TenantResult {
  readonly attack: TenantAttack
  /** B's busy key, admitted per second (both processes), over the measured span. */
  readonly hotPerSec: number
  /** B's first checks of new keys admitted, of all. */
  readonly firstAdmitted: number
  readonly firstChecks: number
  /** B's plain resource and quota, admitted per second. */
  readonly plainPerSec: number
  readonly quotaPerSec: number
  /** Times B's processes lost their connection. */
  readonly disconnects: number
  /** What A's processes saw (reports, leases, closes and error replies by code). */
  readonly hostile: readonly unknown[]
}

const tenantDurationMs = 14_000
/** B is measured from here to the end: the attack is on, B's leases are settled. */
const tenantMeasureFromMs = 6_000

/**
 * Tenants A and B share a family `apikey/*` (10/s a key, burst 10, at most
 * 200 hot keys), a rate resource `api` and a quota `credits`. B runs two
 * processes: each checks a new key 10 times a second, asks `api` at 50/s
 * and `credits` at 20/s; the first asks for its busy key `b-hot` at 12/s
 * from 3 s on (the key's 10/s is the most it gets, half of it by its default
 * share). A does `attack` from 1 s on.
 */
export async function runTenantAttack(attack: TenantAttack): Promise<TenantResult> {
  const { url, done } = await coordinatorOn({
    server: { host: '127.0.0.1', limits: { heartbeatMs: 1000 } },
    tenants: {
      a: { token: 'token-of-tenant-a', weight: 1 },
      b: { token: 'token-of-tenant-b', weight: 1 },
    },
    resources: [
      {
        match: 'apikey/*',
        keyed: true,
        kind: 'rate',
        capacity: 10,
        burst: 10,
        refreshMs: 500,
        maxHotKeys: 200,
      },
      { match: 'api', kind: 'rate', capacity: 1000, refreshMs: 500 },
      { match: 'credits', kind: 'quota', capacity: 1_000_000, window: '1h', refreshMs: 500 },
    ],
  })
  const workers: WorkerProcess[] = []
  try {
    for (const i of [0, 1]) {
      const spec: TenantWorkerSpec = {
        url,
        token: 'token-of-tenant-b',
        clientId: `b-${i}`,
        durationMs: tenantDurationMs,
        tickMs: 20,
        prefix: 'apikey',
        ...(i === 0 ? { hotKey: { key: 'b-hot', ratePerSec: 12, fromMs: 3000 } } : {}),
        newKeysPerSec: 10,
        plain: { id: 'api', ratePerSec: 50 },
        quota: { id: 'credits', ratePerSec: 20 },
      }
      workers.push(startWorker('tenant-worker', spec))
    }
    const hostile: WorkerProcess[] = []
    const base = {
      url,
      token: 'token-of-tenant-a',
      periodMs: 500,
      durationMs: tenantDurationMs - 1000,
    }
    const a = (
      spec: Omit<HostileTenantSpec, 'url' | 'token' | 'periodMs' | 'durationMs'>,
    ): void => {
      hostile.push(startWorker('hostile-tenant', { ...base, ...spec } satisfies HostileTenantSpec))
    }
    await sleep(1000)
    switch (attack) {
      case 'none':
        break
      case 'long-hot-keys':
        a({
          clientPrefix: 'a-long',
          sockets: 1,
          keys: { prefix: 'apikey', count: 200, length: 1000, wants: 1000 },
        })
        a({
          clientPrefix: 'a-250',
          sockets: 1,
          keys: { prefix: 'apikey', count: 200, length: 250, wants: 1000 },
        })
        break
      case 'hot-slots':
        a({
          clientPrefix: 'a-slots',
          sockets: 4,
          keys: { prefix: 'apikey', count: 60, length: 16, wants: 1000 },
        })
        break
      case 'default-places':
        a({ clientPrefix: 'a-traffic', sockets: 10, family: { prefix: 'apikey', traffic: 1e6 } })
        break
      case 'inflated-used':
        a({
          clientPrefix: 'a-used',
          sockets: 1,
          used: { resource: 'credits', used: 1e15, wants: 1 },
        })
        break
    }
    workers.push(...hostile)
    await Promise.all(workers.map((w) => w.exited))
    let hot = 0
    let first = 0
    let firstChecks = 0
    let plain = 0
    let quota = 0
    let disconnects = 0
    for (const w of workers.slice(0, 2)) {
      const records = lines<{
        t: number
        connected?: boolean
        hot?: [number, number]
        first?: [number, number]
        plain?: [number, number]
        quota?: [number, number]
      }>(w)
      const t0 = records[0]?.t ?? 0
      for (const r of records) {
        if (r.connected === false) disconnects++
        if (r.t - t0 < tenantMeasureFromMs || r.hot === undefined) continue
        hot += r.hot[0]
        first += r.first![0]
        firstChecks += r.first![1]
        plain += r.plain![0]
        quota += r.quota![0]
      }
    }
    const spanSec = (tenantDurationMs - tenantMeasureFromMs) / 1000
    return {
      attack,
      hotPerSec: hot / spanSec,
      firstAdmitted: firstChecks === 0 ? 0 : first / firstChecks,
      firstChecks,
      plainPerSec: plain / spanSec,
      quotaPerSec: quota / spanSec,
      disconnects,
      hostile: hostile.map((h) => lines(h)[0]),
    }
  } finally {
    await done(workers)
  }
}

// ---- 5. keys nobody asks for any more ----

export interface ColdKeysResult {
  /** The most hot keys the family had at once, and at the end. */
  readonly most: number
  readonly last: number
  /** Keys the process asked for in all (one new a second). */
  readonly asked: number
}

/**
 * One process asks for a new key every second, each at 30/s (3 times its
 * 10/s, so it goes hot) for 3 s and never again, for 40 s; the family's hot
 * keys are read from `/v1/families` every second.
 */
export async function runColdKeys(): Promise<ColdKeysResult> {
  const { coordinator, url, done } = await coordinatorOn({
    server: { host: '127.0.0.1', limits: { heartbeatMs: 1000 } },
    resources: [
      {
        match: 'apikey/*',
        keyed: true,
        kind: 'rate',
        capacity: 10,
        refreshMs: 500,
        maxHotKeys: 1000,
      },
    ],
  })
  const durationMs = 40_000
  const spec: TenantWorkerSpec = {
    url,
    clientId: 'roller',
    durationMs,
    tickMs: 20,
    prefix: 'apikey',
    rolling: { everyMs: 1000, lifeMs: 3000, ratePerSec: 30 },
  }
  const worker = startWorker('tenant-worker', spec)
  try {
    let most = 0
    let last = 0
    const startMs = Date.now()
    while (Date.now() - startMs < durationMs - 500) {
      await sleep(1000)
      const body = (await fetch(`http://127.0.0.1:${coordinator.port}/v1/families`)
        .then((r) => r.json())
        .catch(() => ({}))) as { families?: { hotKeys?: number }[] }
      last = body.families?.[0]?.hotKeys ?? 0
      most = Math.max(most, last)
    }
    await worker.exited
    return { most, last, asked: Math.floor(durationMs / 1000) }
  } finally {
    await done([worker])
  }
}

// ---- 7. a ledger put back from an older copy ----

export interface StaleLedgerResult {
  /** Units used in the window, by every process (from their logs), and the budget. */
  readonly used: number
  readonly capacity: number
  /** Whether the restarted coordinator noticed the copy was older than what clients hold. */
  readonly noticed: boolean
}

/**
 * A named quota of 3,000 a minute, two processes asking 100/s each. 3 s
 * into a window the data directory's ledger is copied aside; 10 s in the
 * coordinator is SIGKILLed, the copy put back, and it is restarted; a third
 * process then asks 300/s. What the first two were leased and used after the
 * copy, the copy does not know: a coordinator that trusts it hands the third
 * what is already spent.
 */
export async function runStaleLedger(): Promise<StaleLedgerResult> {
  const capacity = 3000
  const windowMs = 60_000
  const { coordinator, url, dir, done } = await coordinatorOn({
    server: { host: '127.0.0.1', limits: { heartbeatMs: 1000 } },
    resources: [
      {
        match: 'mail',
        kind: 'quota',
        capacity,
        window: '1m',
        refreshMs: 250,
        graceMs: 200,
        demand: { estimator: 'max', window: 4 },
      },
    ],
  })
  const workers: WorkerProcess[] = []
  const quotaWorker = (i: number, fromWallMs: number, ratePerSec: number): void => {
    workers.push(
      startWorker('quota-worker', {
        url,
        clientId: `q-${i}`,
        resource: 'mail',
        fromWallMs,
        untilWallMs: runFromMs + 17_000,
        tickMs: 10,
        ratePerSec,
      }),
    )
  }
  // The whole run (17 s and a start) inside one window.
  const now = Date.now()
  const next = Math.ceil(now / windowMs) * windowMs
  const runFromMs = next - now > 19_000 ? now + 1000 : next
  try {
    quotaWorker(0, runFromMs, 100)
    quotaWorker(1, runFromMs, 100)
    const ledger = join(coordinator.dataDir, 'ledger.log')
    const copy = join(dir, 'ledger.copy')
    await sleep(runFromMs + 3000 - Date.now())
    await copyFile(ledger, copy)
    await sleep(runFromMs + 10_000 - Date.now())
    await coordinator.stop()
    await copyFile(copy, ledger)
    await coordinator.start()
    quotaWorker(2, 0, 300)
    await Promise.all(workers.map((w) => w.exited))
    const window = Math.floor(runFromMs / windowMs)
    let used = 0
    for (const w of workers)
      for (const r of lines<{ w?: number; admitted?: number }>(w))
        if (r.w !== undefined && r.admitted !== undefined && Math.floor(r.w / windowMs) === window)
          used += r.admitted
    return { used, capacity, noticed: /older copy/.test(coordinator.log) }
  } finally {
    await done(workers)
  }
}
