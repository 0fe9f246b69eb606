import { mkdtemp, rm, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { createClient, type KeyedFamily, type SluiceClient } from '../client/index.js'
import { CoordinatorProcess, freePort, sleep } from './faults/harness.js'
import { hostMs } from './faults/host-time.js'

/**
 * Remote decisions at the coordinator (#41: p99 ≤ 1 ms on loopback, ≥ 50k decisions/s per
 * coordinator). A real coordinator (`sluice serve`) on loopback, and `processes` clients in this
 * process, each checking a crowded keyed family through `decide`: past five processes that
 * decide remotely, none holds a default share and the coordinator's own part holds every key,
 * so every check is asked of the coordinator, batched per connection (client/remote.ts).
 * Keys are drawn uniformly from `keys`, each with room for every check (capacity and burst
 * 10,000), so what is timed is the round trip and the coordinator's work, not refusals.
 *
 * Two phases after a warm-up: `paced`, a fixed total rate of asks spread over the clients
 * each millisecond-ish tick (latency at a load a gateway fleet sends); `saturated`, each
 * client keeping `window` asks in flight (throughput). Latency is ask to answer, host
 * monotonic time.
 */
export interface RemoteBenchOptions {
  /**
   * `quota`: the family is a keyed quota (10,000 a key a 1 h window), whose admitted answers
   * wait for what the coordinator's part spent to be in the ledger when it is not yet
   * (server/coordinator/spend-reserve.ts): keys drawn uniformly from many are mostly new to it.
   */
  readonly kind?: 'rate' | 'quota'
  readonly processes: number
  readonly keys: number
  readonly pacedPerSec: number
  readonly window: number
  readonly measureMs: number
}

export interface RemoteBenchRow {
  readonly phase: string
  readonly askedPerSec: number
  readonly answeredPerSec: number
  readonly admittedShare: number
  readonly p50Ms: number
  readonly p99Ms: number
  readonly p999Ms: number
}

const quantile = (sorted: Float64Array, q: number): number =>
  sorted.length === 0
    ? Number.NaN
    : sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))]!

/** One phase's row: rates over `seconds`, and the latencies' quantiles. */
function phaseRow(
  phase: string,
  seconds: number,
  counts: { asked: number; answered: number; admitted: number },
  latencies: readonly number[],
): RemoteBenchRow {
  const sorted = Float64Array.from(latencies).sort()
  return {
    phase,
    askedPerSec: counts.asked / seconds,
    answeredPerSec: counts.answered / seconds,
    admittedShare: counts.answered > 0 ? counts.admitted / counts.answered : 0,
    p50Ms: quantile(sorted, 0.5),
    p99Ms: quantile(sorted, 0.99),
    p999Ms: quantile(sorted, 0.999),
  }
}

export async function benchRemote(options: RemoteBenchOptions): Promise<RemoteBenchRow[]> {
  const dir = await mkdtemp(join(tmpdir(), 'sluice-remote-'))
  const configPath = join(dir, 'sluice.json')
  await writeFile(
    configPath,
    JSON.stringify({
      server: { host: '127.0.0.1' },
      resources: [
        options.kind === 'quota'
          ? { match: 'key/*', keyed: true, kind: 'quota', capacity: 10_000, window: '1h' }
          : { match: 'key/*', keyed: true, kind: 'rate', capacity: 10_000, burst: 10_000 },
      ],
    }),
  )
  const coordinator = new CoordinatorProcess(configPath, await freePort())
  const clients: SluiceClient[] = []
  const families: KeyedFamily[] = []
  try {
    await coordinator.start()
    for (let i = 0; i < options.processes; i++) {
      const client = createClient({
        url: `ws://127.0.0.1:${coordinator.port}/v1/connect`,
        clientId: `remote-${i}`,
      })
      client.on('error', () => undefined)
      clients.push(client)
      families.push(client.keyed('key'))
    }
    await Promise.all(families.map((f) => f.ready({ timeoutMs: 10_000 })))
    let seed = 12345
    const nextKey = (): string => {
      seed = (seed * 1103515245 + 12345) % 2147483648
      return `k${seed % options.keys}`
    }
    // Warm-up: every process says it decides remotely; the family turns crowded at a round.
    const warmUntil = hostMs() + 3000
    while (hostMs() < warmUntil) {
      for (const f of families) for (let i = 0; i < 5; i++) void f.decide(nextKey())
      await sleep(5)
    }
    const rows: RemoteBenchRow[] = []

    // Paced: the total rate spread over the clients, each tick.
    {
      const latencies: number[] = []
      let asked = 0
      let answered = 0
      let admitted = 0
      const tickMs = 2
      const perTick = (options.pacedPerSec * tickMs) / 1000 / families.length
      let owed = 0
      const startMs = hostMs()
      const untilMs = startMs + options.measureMs
      while (hostMs() < untilMs) {
        owed += perTick
        const n = Math.floor(owed)
        owed -= n
        for (const f of families)
          for (let i = 0; i < n; i++) {
            const at = hostMs()
            asked++
            const d = f.decide(nextKey())
            if (typeof d === 'boolean') {
              answered++
              if (d) admitted++
              latencies.push(0)
              continue
            }
            void d.then((a) => {
              answered++
              if (a.admitted) admitted++
              latencies.push(hostMs() - at)
            })
          }
        await sleep(tickMs)
      }
      await sleep(200)
      const seconds = (hostMs() - startMs - 200) / 1000
      rows.push(
        phaseRow(
          `paced, ${options.pacedPerSec.toLocaleString('en')} asks/s`,
          seconds,
          { asked, answered, admitted },
          latencies,
        ),
      )
    }

    // Saturated: each client keeps `window` asks in flight.
    {
      const latencies: number[] = []
      let asked = 0
      let answered = 0
      let admitted = 0
      let stop = false
      const startMs = hostMs()
      const loop = async (f: KeyedFamily): Promise<void> => {
        while (!stop) {
          const at = hostMs()
          asked++
          const d = f.decide(nextKey())
          const a = typeof d === 'boolean' ? { admitted: d } : await d
          answered++
          if (a.admitted) admitted++
          latencies.push(hostMs() - at)
          // A refusal for too many in flight comes at once: yield so the loop cannot spin.
          if (typeof d === 'boolean') await sleep(0)
        }
      }
      const loops = families.flatMap((f) => Array.from({ length: options.window }, () => loop(f)))
      await sleep(options.measureMs)
      stop = true
      const seconds = (hostMs() - startMs) / 1000
      await Promise.all(loops)
      rows.push(
        phaseRow(
          `saturated, ${options.window} in flight per process`,
          seconds,
          { asked, answered, admitted },
          latencies,
        ),
      )
    }
    return rows
  } finally {
    await Promise.all(clients.map((c) => c.close().catch(() => undefined)))
    await coordinator.stop()
    await rm(dir, { recursive: true, force: true })
  }
}

export function remoteRow(r: RemoteBenchRow, processes: number): string {
  const ms = (x: number): string => x.toFixed(2)
  return `| ${r.phase} | ${processes} | ${Math.round(r.askedPerSec).toLocaleString('en')} | ${Math.round(r.answeredPerSec).toLocaleString('en')} | ${(100 * r.admittedShare).toFixed(1)}% | ${ms(r.p50Ms)} | ${ms(r.p99Ms)} | ${ms(r.p999Ms)} |`
}
