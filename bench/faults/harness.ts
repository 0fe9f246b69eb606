import { spawn, type ChildProcess } from 'node:child_process'
import { existsSync } from 'node:fs'
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises'
import { createServer } from 'node:net'
import { tmpdir } from 'node:os'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'
import type { FailureMode, ResourceKind } from '../../shared/index.js'
import { hostMs } from './host-time.js'
import {
  excessOverBound,
  maxInFlight,
  utilisation,
  worstWindowRatio,
  type Admission,
  type CapacitySteps,
  type SlotEvent,
} from './measure.js'
import { TcpProxy, type ProxyMode } from './proxy.js'
import type { WorkerSpec } from './worker.js'

/** A resource as the scenario's config has it (the coordinator's template, abridged). */
export interface FaultResource {
  readonly id: string
  readonly kind: ResourceKind
  readonly capacity: number
  readonly leaseTtlMs: number
  readonly refreshMs: number
  readonly graceMs: number
  readonly safeHoldMs: number
  readonly learningMs?: number | undefined
  /** Rate: the whole resource's burst, tokens; default one second of capacity. */
  readonly burst?: number | undefined
}

export interface FaultClientGroup {
  readonly prefix: string
  readonly count: number
  readonly resources: readonly {
    readonly id: string
    readonly wants: number
    readonly failureMode: FailureMode
    readonly holdMs?: number | undefined
    /** Rate: demand moves within ±swing·wants, a new value every 250 ms. */
    readonly swing?: number | undefined
  }[]
}

/** Something done to the system at `atMs` after the clients start. */
export type FaultAction =
  /** Clients whose id starts with `clients` get their link cut, stalled or opened. */
  | {
      readonly atMs: number
      readonly type: 'link'
      readonly clients: string
      readonly mode: ProxyMode
    }
  /** SIGKILL of the coordinator process. */
  | { readonly atMs: number; readonly type: 'kill' }
  /**
   * A new coordinator process on the same port, config and data directory; its wall clock
   * `wallOffsetSec` off the host's (libfaketime; its monotonic clock stays true).
   */
  | {
      readonly atMs: number
      readonly type: 'restart'
      readonly wallOffsetSec?: number | undefined
    }
  /** While the coordinator is down: its ledger file damaged as an unlucky operator would. */
  | { readonly atMs: number; readonly type: 'damage'; readonly how: LedgerDamage }
  /** SIGSTOP of the coordinator for `forMs` (a long GC pause, a stalled VM), then SIGCONT. */
  | { readonly atMs: number; readonly type: 'pause'; readonly forMs: number }
  /** The config file gets a new capacity for `resource`, then SIGHUP. */
  | {
      readonly atMs: number
      readonly type: 'capacity'
      readonly resource: string
      readonly capacity: number
    }
  /** A second process starts with the id of client `client`, through its own link. */
  | { readonly atMs: number; readonly type: 'duplicate'; readonly client: string }
  /** The slow disk (`slowDisk`) is fast again: the coordinator's fdatasync calls no longer delayed. */
  | { readonly atMs: number; readonly type: 'disk recovers' }

/** How `damage` leaves the ledger file. */
export type LedgerDamage = 'first-line' | 'half' | 'empty'

/** The ledger file's text after `how`. */
export function damaged(text: string, how: LedgerDamage): string {
  switch (how) {
    case 'first-line':
      return text.slice(0, text.indexOf('\n') + 1)
    case 'half':
      return text.slice(0, Math.floor(text.length / 2))
    case 'empty':
      return ''
  }
}

export interface FaultScenario {
  readonly name: string
  readonly description: string
  readonly durationMs: number
  /** Coordinator heartbeat (ping period), ms. */
  readonly heartbeatMs: number
  readonly resources: readonly FaultResource[]
  readonly clients: readonly FaultClientGroup[]
  readonly actions: readonly FaultAction[]
  /** Extra config for every template (e.g. unsafe learning), merged as is. */
  readonly templateExtra?: Readonly<Record<string, unknown>> | undefined
  /** The test suite's check that leases are kept, not resent: fewer leases than this in all. */
  readonly maxLeases?: number | undefined
  /**
   * The test suite's check that something was admitted (a run that admits nothing passes the
   * bound vacuously): utilisation after learning above this; default 0.5.
   */
  readonly minUtilisation?: number | undefined
  /** The first coordinator runs under `ulimit -f` of this many KiB (a disk that fills up). */
  readonly fileLimitKiB?: number | undefined
  /**
   * A slow disk under the first coordinator: each fdatasync of its ledger takes `fsyncMs` longer
   * (strace-injected), with `server.ledgerMaxWriteMs` set to `ledgerMaxWriteMs`: lease batches
   * go out later than their leases were counted from, until a `disk recovers` action (a
   * restart's disk is fast too).
   */
  readonly slowDisk?: { readonly fsyncMs: number; readonly ledgerMaxWriteMs: number } | undefined
}

export interface FaultResult {
  readonly scenario: string
  readonly resource: string
  readonly kind: ResourceKind
  readonly failureModes: string
  /** rate: capacity·t + burst; concurrency: in flight ≤ capacity. */
  readonly bound: string
  /** Worst admitted ÷ capacity over any 1 s window (rate). */
  readonly worst1s: number
  /** Most admitted beyond ∫capacity + burst over any interval (rate; ≤ 0: held). */
  readonly excess: number
  /** Most slots in flight at once (concurrency). */
  readonly inFlightMax: number
  readonly capacity: number
  /** Admitted ÷ ∫capacity over the run after the first learning period. */
  readonly utilisation: number
  /** Leases the clients received, all of them together. */
  readonly leases: number
  /** Lease batches the coordinator sent shortened, written later than `ledgerMaxWriteMs` (its log). */
  readonly shortenedBatches: number
  readonly ok: boolean
}

function findRoot(): string {
  let dir = dirname(fileURLToPath(import.meta.url))
  while (!existsSync(join(dir, 'package.json')) && dirname(dir) !== dir) dir = dirname(dir)
  return dir
}
const root = findRoot()

export async function freePort(): Promise<number> {
  const server = createServer()
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  const { port } = server.address() as { port: number }
  await new Promise((resolve) => server.close(resolve))
  return port
}

/** Debian's libfaketime (package faketime), preloaded to step one process's wall clock. */
export const libfaketime = '/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1'

/**
 * `argv` run with every fdatasync `delayMs` longer: a slow disk for that process alone. strace
 * `-D` runs the tracer as a detached grandchild, so the process spawned is the traced one
 * itself (a SIGKILL reaches it); `-I1` lets a SIGTERM detach it (the disk recovers). No
 * seccomp filter: one would outlive the tracer and fail every fdatasync with ENOSYS after.
 */
export function withSlowFsync(argv: readonly string[], delayMs: number): string[] {
  return [
    'strace',
    '-D',
    '-I1',
    '-f',
    '-qq',
    '-o',
    '/dev/null',
    '-e',
    'trace=fdatasync',
    '-e',
    `inject=fdatasync:delay_exit=${Math.round(delayMs * 1000)}`,
    ...argv,
  ]
}

/** Lease batches a coordinator's log says went out shortened (write-ahead.ts, `shortened`). */
export function shortenedInLog(log: string): number {
  let n = 0
  for (const line of log.split('\n')) {
    if (!line.includes('"shortened"')) continue
    try {
      n += (JSON.parse(line) as { shortened?: number }).shortened ?? 0
    } catch {
      // Not a whole JSON line (a torn write at a SIGKILL).
    }
  }
  return n
}

export const sleep = (ms: number): Promise<void> =>
  new Promise((resolve) => setTimeout(resolve, Math.max(0, ms)))

/** The coordinator as a real process: `sluice serve` on a fixed port, so a restart takes it again. */
export class CoordinatorProcess {
  child: ChildProcess | undefined
  readonly #configPath: string
  readonly port: number
  log = ''

  constructor(configPath: string, port: number) {
    this.#configPath = configPath
    this.port = port
  }

  /** The ledger beside the config: a restart resumes from it. */
  get dataDir(): string {
    return join(dirname(this.#configPath), 'data')
  }

  /**
   * Starts `sluice serve`: with its wall clock `wallOffsetSec` off (libfaketime, preloaded into
   * this very process so a SIGKILL reaches it), under a file-size limit (`sh -c 'ulimit -f …;
   * exec …'`, the same process after the exec).
   */
  async start(
    options: {
      wallOffsetSec?: number | undefined
      /** A file holding the offset (`+30s`), read as it changes: a live step of the wall clock. */
      wallOffsetFile?: string | undefined
      fileLimitKiB?: number | undefined
      /** Each fdatasync this much longer (`withSlowFsync`): a slow disk. */
      fsyncDelayMs?: number | undefined
    } = {},
  ): Promise<void> {
    const plain = [
      process.execPath,
      ...cpuProfArgs(),
      join(root, 'dist/server/cli/bin.js'),
      'serve',
      '--config',
      this.#configPath,
      '--port',
      String(this.port),
      '--data-dir',
      this.dataDir,
    ]
    const argv =
      options.fsyncDelayMs === undefined ? plain : withSlowFsync(plain, options.fsyncDelayMs)
    const env: NodeJS.ProcessEnv = {
      ...process.env,
      SLUICE_LOG_LEVEL: process.env.SLUICE_FAULTS_LOG_LEVEL ?? 'warn',
    }
    if (options.wallOffsetSec !== undefined) {
      env.LD_PRELOAD = libfaketime
      env.FAKETIME = `${options.wallOffsetSec >= 0 ? '+' : ''}${options.wallOffsetSec}s`
      env.FAKETIME_DONT_FAKE_MONOTONIC = '1'
    } else if (options.wallOffsetFile !== undefined) {
      env.LD_PRELOAD = libfaketime
      env.FAKETIME_TIMESTAMP_FILE = options.wallOffsetFile
      env.FAKETIME_NO_CACHE = '1'
      env.FAKETIME_DONT_FAKE_MONOTONIC = '1'
    }
    const [command, ...args] =
      options.fileLimitKiB === undefined
        ? argv
        : ['sh', '-c', `ulimit -f ${options.fileLimitKiB}; exec "$@"`, 'sh', ...argv]
    const child = spawn(command!, args, { env, stdio: ['ignore', 'pipe', 'pipe'] })
    this.child = child
    child.stdout.on('data', (d: Buffer) => (this.log += d.toString()))
    child.stderr.on('data', (d: Buffer) => (this.log += d.toString()))
    for (let i = 0; i < 200; i++) {
      const ok = await fetch(`http://127.0.0.1:${this.port}/healthz`)
        .then((r) => r.ok)
        .catch(() => false)
      if (ok) return
      if (child.exitCode !== null) break
      await sleep(25)
    }
    throw new Error(`coordinator did not start:\n${this.log.slice(-2000)}`)
  }

  signal(signal: NodeJS.Signals): void {
    this.child?.kill(signal)
  }

  /**
   * A slow disk (`withSlowFsync`) recovers: its tracer, told to stop, detaches and the
   * coordinator runs on untraced.
   */
  async fastDisk(): Promise<void> {
    const pid = this.child?.pid
    if (pid === undefined) return
    const status = await readFile(`/proc/${pid}/status`, 'utf8').catch(() => '')
    const tracer = Number(/^TracerPid:\s*(\d+)/m.exec(status)?.[1] ?? '0')
    if (tracer === 0) return
    process.kill(tracer, 'SIGTERM')
    // It detaches once a delayed call in flight returns: within one delay.
    for (let i = 0; i < 500; i++) {
      const now = await readFile(`/proc/${pid}/status`, 'utf8').catch(() => '')
      if (/^TracerPid:\s*0$/m.test(now)) return
      await sleep(10)
    }
    throw new Error('the slow disk did not recover: its tracer is still attached')
  }

  async stop(): Promise<void> {
    const child = this.child
    if (child === undefined || child.exitCode !== null || child.signalCode !== null) return
    const exited = new Promise((resolve) => child.once('exit', resolve))
    child.kill('SIGCONT')
    // Profiled: a clean exit writes the profile (SIGKILL after 10 s if it does not come).
    if (cpuProfArgs().length > 0) {
      child.kill('SIGTERM')
      if ((await Promise.race([exited, sleep(10_000).then(() => 'late')])) !== 'late') return
    }
    child.kill('SIGKILL')
    await exited
  }
}

/**
 * `SLUICE_BENCH_CPU_PROF=<dir>`: the coordinator runs under `--cpu-prof` (sampled every 100 µs)
 * and writes its profile there as it stops (SIGTERM then, not SIGKILL): where its time goes,
 * and its long turns (a remote answer's tail is the longest turn it waits behind).
 */
function cpuProfArgs(): string[] {
  const dir = process.env.SLUICE_BENCH_CPU_PROF
  return dir === undefined || dir === ''
    ? []
    : ['--cpu-prof', `--cpu-prof-dir=${dir}`, '--cpu-prof-interval', '100']
}

function configText(scenario: FaultScenario, capacities: ReadonlyMap<string, number>): string {
  const config = {
    server: {
      host: '127.0.0.1',
      limits: { heartbeatMs: scenario.heartbeatMs, roundDebounceMs: 20 },
      ...(scenario.slowDisk === undefined
        ? {}
        : { ledgerMaxWriteMs: scenario.slowDisk.ledgerMaxWriteMs }),
      // A restarted coordinator restores what clients prove they hold.
      holdingsKey: { current: 'the fault suite signs its leases with this key' },
    },
    resources: scenario.resources.map((r) => ({
      match: r.id,
      kind: r.kind,
      capacity: capacities.get(r.id) ?? r.capacity,
      leaseTtlMs: r.leaseTtlMs,
      refreshMs: r.refreshMs,
      graceMs: r.graceMs,
      safeHoldMs: r.safeHoldMs,
      surplus: 'spread',
      demand: { window: 1 },
      ...(r.learningMs === undefined ? {} : { learningMs: r.learningMs }),
      ...(r.burst === undefined ? {} : { burst: r.burst }),
      ...scenario.templateExtra,
    })),
  }
  // JSON is YAML.
  return JSON.stringify(config, null, 2)
}

interface Worker {
  readonly id: string
  readonly child: ChildProcess
  readonly proxy: TcpProxy
  output: string
  readonly exited: Promise<void>
}

/**
 * Runs one fault scenario with real processes: a coordinator (`sluice
 * serve`), one worker process per client, each behind its own TCP proxy, and
 * the scenario's actions on the wall clock. Returns the measures per
 * resource, from what the workers logged.
 */
export async function runFaultScenario(scenario: FaultScenario): Promise<FaultResult[]> {
  const dir = await mkdtemp(join(tmpdir(), 'sluice-faults-'))
  const configPath = join(dir, 'sluice.json')
  const capacities = new Map<string, number>()
  await writeFile(configPath, configText(scenario, capacities))
  const coordinator = new CoordinatorProcess(configPath, await freePort())
  const workers: Worker[] = []
  const steps = new Map<string, { fromMs: number; capacity: number }[]>()
  try {
    await coordinator.start({
      ...(scenario.fileLimitKiB === undefined ? {} : { fileLimitKiB: scenario.fileLimitKiB }),
      fsyncDelayMs: scenario.slowDisk?.fsyncMs,
    })
    const spawnWorker = async (
      id: string,
      group: FaultClientGroup,
      startMs: number,
    ): Promise<Worker> => {
      const proxy = await TcpProxy.start(coordinator.port)
      const spec: WorkerSpec = {
        url: `ws://127.0.0.1:${proxy.port}/v1/connect`,
        clientId: id,
        durationMs: Math.max(500, scenario.durationMs - startMs),
        tickMs: 10,
        resources: group.resources.map((r) => ({
          ...r,
          kind: scenario.resources.find((s) => s.id === r.id)!.kind,
        })),
      }
      const child = spawn(
        process.execPath,
        [join(root, 'dist/bench/faults/worker.js'), JSON.stringify(spec)],
        {
          stdio: ['ignore', 'pipe', 'inherit'],
        },
      )
      const worker: Worker = {
        id,
        child,
        proxy,
        output: '',
        exited: new Promise((resolve) => child.once('exit', () => resolve())),
      }
      child.stdout.on('data', (d: Buffer) => (worker.output += d.toString()))
      return worker
    }
    const t0 = hostMs()
    for (const r of scenario.resources) steps.set(r.id, [{ fromMs: t0, capacity: r.capacity }])
    for (const group of scenario.clients)
      for (let i = 0; i < group.count; i++)
        workers.push(await spawnWorker(`${group.prefix}-${i}`, group, 0))

    const actions = [...scenario.actions].sort((a, b) => a.atMs - b.atMs)
    for (const action of actions) {
      await sleep(t0 + action.atMs - hostMs())
      switch (action.type) {
        case 'link':
          for (const w of workers) if (w.id.startsWith(action.clients)) w.proxy.set(action.mode)
          break
        case 'kill':
          await coordinator.stop()
          break
        case 'restart':
          await coordinator.start(
            action.wallOffsetSec === undefined ? {} : { wallOffsetSec: action.wallOffsetSec },
          )
          break
        case 'damage': {
          const path = join(coordinator.dataDir, 'ledger.log')
          await writeFile(path, damaged(await readFile(path, 'utf8'), action.how))
          break
        }
        case 'pause':
          coordinator.signal('SIGSTOP')
          await sleep(action.forMs)
          coordinator.signal('SIGCONT')
          break
        case 'capacity':
          capacities.set(action.resource, action.capacity)
          await writeFile(configPath, configText(scenario, capacities))
          coordinator.signal('SIGHUP')
          steps.get(action.resource)!.push({ fromMs: hostMs(), capacity: action.capacity })
          break
        case 'disk recovers':
          await coordinator.fastDisk()
          break
        case 'duplicate': {
          const group = scenario.clients.find((g) => action.client.startsWith(`${g.prefix}-`))!
          workers.push(await spawnWorker(action.client, group, action.atMs))
          break
        }
      }
    }
    // Every worker stops by itself; bounded here too.
    await Promise.race([
      Promise.all(workers.map((w) => w.exited)),
      sleep(scenario.durationMs + 15_000),
    ])
    return measure(scenario, workers, steps, t0, shortenedInLog(coordinator.log))
  } finally {
    for (const w of workers) {
      if (w.child.exitCode === null) w.child.kill('SIGKILL')
      await w.proxy.close()
    }
    await coordinator.stop()
    await rm(dir, { recursive: true, force: true })
  }
}

function measure(
  scenario: FaultScenario,
  workers: readonly Worker[],
  steps: ReadonlyMap<string, { fromMs: number; capacity: number }[]>,
  t0: number,
  shortenedBatches: number,
): FaultResult[] {
  const admissions = new Map<string, Admission[]>()
  const slots = new Map<string, SlotEvent[]>()
  const leases = new Map<string, number>()
  for (const w of workers)
    for (const line of w.output.split('\n')) {
      if (line === '') continue
      const record = JSON.parse(line) as {
        t: number
        r?: string
        a?: number
        s?: 1 | -1
        lease?: number
      }
      if (record.r === undefined) continue
      if (record.lease !== undefined) leases.set(record.r, (leases.get(record.r) ?? 0) + 1)
      else if (record.a !== undefined) {
        let list = admissions.get(record.r)
        if (list === undefined) admissions.set(record.r, (list = []))
        list.push({ t: record.t, n: record.a })
      } else if (record.s !== undefined) {
        let list = slots.get(record.r)
        if (list === undefined) slots.set(record.r, (list = []))
        list.push({ t: record.t, d: record.s })
      }
    }
  return scenario.resources.map((r) => {
    const capacitySteps: CapacitySteps = steps.get(r.id)!
    const modes = [
      ...new Set(
        scenario.clients.flatMap((g) =>
          g.resources.filter((x) => x.id === r.id).map((x) => x.failureMode),
        ),
      ),
    ]
    const learnedMs = t0 + (r.learningMs ?? r.leaseTtlMs + r.graceMs + r.safeHoldMs)
    const optimistic = modes.includes('optimistic')
    if (r.kind === 'rate') {
      const a = admissions.get(r.id) ?? []
      // A rate resource's burst is one second of its capacity unless the scenario says.
      const excess = excessOverBound(a, capacitySteps, r.burst ?? r.capacity)
      return {
        scenario: scenario.name,
        resource: r.id,
        kind: r.kind,
        failureModes: modes.join(', '),
        bound: 'capacity·t + burst',
        worst1s: worstWindowRatio(a, capacitySteps),
        excess,
        inFlightMax: 0,
        capacity: r.capacity,
        utilisation: utilisation(a, capacitySteps, learnedMs, t0 + scenario.durationMs),
        leases: leases.get(r.id) ?? 0,
        shortenedBatches,
        ok: optimistic || excess <= 0,
      }
    }
    const inFlight = maxInFlight(slots.get(r.id) ?? [])
    const limit = Math.max(...capacitySteps.map((s) => s.capacity))
    return {
      scenario: scenario.name,
      resource: r.id,
      kind: r.kind,
      failureModes: modes.join(', '),
      bound: 'in flight ≤ capacity',
      worst1s: 0,
      excess: 0,
      inFlightMax: inFlight,
      capacity: r.capacity,
      utilisation: 1,
      leases: leases.get(r.id) ?? 0,
      shortenedBatches,
      ok: optimistic || inFlight <= limit,
    }
  })
}
