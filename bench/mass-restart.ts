import type { ChildProcess } from 'node:child_process'
import { mkdtemp, rm, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { benchConfig, procStats, spawnServe } from './coordinator.js'
import { LoadClients } from './load.js'
import { summarise } from './stats.js'

/**
 * A coordinator restart at scale: `clients` clients (the coordinator
 * benchmark's load, usage on) reporting to `sluice serve` with the embedded
 * file ledger; SIGKILL, then at once a new `sluice serve` on the same port
 * and data directory. The clients come back as the client library does
 * (full-jitter backoff, base 100 ms, cap 10 s, 500 ms while refused outright; a
 * connect timeout of 10 s: its defaults) and report on
 * their welcome. Measured from the kill: the new process listening, and
 * each client's first lease from it; the coordinator's CPU over the
 * catch-up; then, over the 10 s after every client is back, leases sent
 * per client per second and the coordinator's CPU.
 */
export interface MassRestartSample {
  listeningMs: number
  p50LeasedMs: number
  p99LeasedMs: number
  allLeasedMs: number
  catchUpCpuPercent: number
  /** Leases per client per second over the 10 s after every client is back (0.25 in steady state: renewals). */
  afterLeasesPerClientSec: number
  afterCpuPercent: number
}

const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms))

async function once(clients: number, resources: number): Promise<MassRestartSample> {
  const dir = await mkdtemp(join(tmpdir(), 'sluice-mass-restart-'))
  const file = join(dir, 'bench.yaml')
  const dataDir = join(dir, 'data')
  await writeFile(file, benchConfig(resources))
  const children: ChildProcess[] = []
  const load = { current: undefined as LoadClients | undefined }
  try {
    const first = await spawnServe(file, 0, dataDir)
    children.push(first.child)
    const port = Number(new URL(first.wsUrl).port)
    const clientsLoad = new LoadClients(first.wsUrl, {
      clients,
      resources,
      withUsage: true,
      // BENCH_REFUSED_CAP_MS=10000: clients as before backoffRefusedCapMs (the plain backoff).
      reconnect: {
        baseMs: 100,
        capMs: 10_000,
        refusedCapMs: Number(process.env.BENCH_REFUSED_CAP_MS ?? 500),
      },
    })
    load.current = clientsLoad
    await clientsLoad.connectAll()
    clientsLoad.start()
    await sleep(Number(process.env.BENCH_WARMUP_MS ?? 5000))

    // From the kill on, a client counts as back at its first lease after a welcome of the new process.
    const welcomed = new Uint8Array(clients)
    const leasedAt = new Float64Array(clients)
    let restarted = false
    let leased = 0
    clientsLoad.onWelcome = (i) => {
      if (restarted) welcomed[i] = 1
    }
    clientsLoad.onLease = (i) => {
      if (welcomed[i] === 1 && leasedAt[i] === 0) {
        leasedAt[i] = performance.now()
        leased++
      }
    }
    const exited = new Promise((resolve) => first.child.once('exit', resolve))
    const killedAt = performance.now()
    first.child.kill('SIGKILL')
    await exited
    restarted = true
    const second = await spawnServe(file, port, dataDir)
    children.push(second.child)
    const listeningMs = performance.now() - killedAt
    const before = await procStats(second.child.pid!)
    const startMs = performance.now()
    while (leased < clients && performance.now() - killedAt < 120_000) await sleep(10)
    const after = await procStats(second.child.pid!)
    const catchUpMs = performance.now() - startMs
    if (leased < clients) throw new Error(`only ${leased} of ${clients} clients leased anew`)

    clientsLoad.leasesMeasured = 0
    clientsLoad.measuring = true
    const afterStart = await procStats(second.child.pid!)
    await sleep(10_000)
    const afterEnd = await procStats(second.child.pid!)
    clientsLoad.measuring = false
    const back = Array.from(leasedAt, (t) => t - killedAt).sort((a, b) => a - b)
    const at = (sorted: number[], q: number): number =>
      sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))] ?? NaN
    return {
      listeningMs,
      p50LeasedMs: at(back, 0.5),
      p99LeasedMs: at(back, 0.99),
      allLeasedMs: back.at(-1) ?? NaN,
      catchUpCpuPercent: ((after.cpuTicks - before.cpuTicks) / 100 / (catchUpMs / 1000)) * 100,
      afterLeasesPerClientSec: clientsLoad.leasesMeasured / clients / 10,
      afterCpuPercent: ((afterEnd.cpuTicks - afterStart.cpuTicks) / 100 / 10) * 100,
    }
  } finally {
    load.current?.close()
    for (const child of children) if (child.exitCode === null) child.kill('SIGKILL')
    await rm(dir, { recursive: true, force: true })
  }
}

/** Markdown rows: one per figure, median (min–max) of `runs`. */
export async function benchMassRestart(runs: number, clients: number): Promise<string[]> {
  const resources = 10
  const samples: MassRestartSample[] = []
  for (let r = 0; r < runs; r++) samples.push(await once(clients, resources))
  const row = (what: string, values: number[], unit: string, digits: number): string => {
    const s = summarise(values)
    return `| ${clients.toLocaleString('en-US')} | ${what} | ${s.median.toFixed(digits)} ${unit} | ${s.min.toFixed(digits)}–${s.max.toFixed(digits)} ${unit} |`
  }
  const col = <K extends keyof MassRestartSample>(k: K): number[] => samples.map((s) => s[k])
  return [
    row('kill → the new process listens', col('listeningMs'), 'ms', 0),
    row('kill → half the clients leased anew', col('p50LeasedMs'), 'ms', 0),
    row('kill → 99% leased anew', col('p99LeasedMs'), 'ms', 0),
    row('kill → every client leased anew', col('allLeasedMs'), 'ms', 0),
    row('coordinator CPU during the catch-up', col('catchUpCpuPercent'), '%', 1),
    row('leases per client per second, the 10 s after', col('afterLeasesPerClientSec'), '', 2),
    row('coordinator CPU, the 10 s after', col('afterCpuPercent'), '%', 1),
  ]
}
