import { execFileSync, spawn } from 'node:child_process'
import { mkdtemp, rm, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { CoordinatorProcess, freePort, sleep } from './faults/harness.js'
import type { ScaleWorkerSpec } from './keys-scale-worker.js'

const here = dirname(fileURLToPath(import.meta.url))

/** One scrape of the coordinator's /metrics: what this benchmark reads of it. */
interface Scrape {
  readonly atMs: number
  readonly cpuSec: number
  readonly rssBytes: number
  readonly heapBytes: number
  readonly hotKeys: number
  readonly holders: number
}

function metric(text: string, name: string): number {
  const m = new RegExp(`^${name}(?:\\{[^}]*\\})? ([0-9.e+-]+)$`, 'm').exec(text)
  return m === null ? NaN : Number(m[1])
}

async function scrape(port: number): Promise<Scrape> {
  const text = await (await fetch(`http://127.0.0.1:${port}/metrics`)).text()
  return {
    atMs: performance.now(),
    cpuSec: metric(text, 'sluice_process_cpu_seconds_total'),
    rssBytes: metric(text, 'sluice_process_resident_memory_bytes'),
    heapBytes: metric(text, 'sluice_nodejs_heap_size_used_bytes'),
    hotKeys: metric(text, 'sluice_family_hot_keys'),
    holders: metric(text, 'sluice_family_holders'),
  }
}

/** A phase's figures: CPU over it, memory at its end (the least heap of its last 5 scrapes: after a GC). */
function phase(scrapes: readonly Scrape[]): {
  cpuPercent: number
  rssMb: number
  heapMb: number
  hotKeys: number
  holders: number
} {
  const first = scrapes[0]!
  const last = scrapes[scrapes.length - 1]!
  const tail = scrapes.slice(-5)
  return {
    cpuPercent: (100 * (last.cpuSec - first.cpuSec)) / ((last.atMs - first.atMs) / 1000),
    rssMb: Math.min(...tail.map((s) => s.rssBytes)) / 2 ** 20,
    heapMb: Math.min(...tail.map((s) => s.heapBytes)) / 2 ** 20,
    // The most seen in the phase: its last scrape may come after the workers stopped asking
    // (0 hot keys), or miss the family's series (NaN), as some runs of 2026-12-02 showed.
    hotKeys: Math.max(0, ...scrapes.map((x) => x.hotKeys).filter((x) => !Number.isNaN(x))),
    holders: last.holders,
  }
}

interface WorkerOut {
  heap?: { before: number; after: number; keys: number }
  hotLeased?: number
  seconds: { phase: string; decisions: number; hotAsked: number; hotAdmitted: number }[]
  errors: string[]
}

/**
 * `npm run bench -- keys-scale`: a keyed family at scale. Two gateway
 * processes and a coordinator (`sluice serve`, file ledger) in processes of
 * their own; new keys at `BENCH_SCALE_KEYS_PER_MIN` (default 1,000,000 a
 * minute, each asked for once by one process: cold keys), then with them
 * `BENCH_SCALE_HOT` keys (default 10,000) asked for by both processes above
 * their default share (16/s and 6/s of 20/s: every one leased one by one,
 * 2 holders each). Read from the coordinator's /metrics each second: CPU,
 * RSS and heap per phase; from each process: the heap per key it tracks,
 * and what its hot keys got against max-min.
 */
export async function benchKeysScale(): Promise<string[]> {
  const seconds = Number(process.env.BENCH_SCALE_SECONDS ?? 40)
  const keysPerMin = Number(process.env.BENCH_SCALE_KEYS_PER_MIN ?? 1_000_000)
  const hotKeys = Number(process.env.BENCH_SCALE_HOT ?? 10_000)
  const capacity = 20
  const asks = [16, 6]
  const dir = await mkdtemp(join(tmpdir(), 'sluice-keys-scale-'))
  const config = join(dir, 'sluice.json')
  await writeFile(
    config,
    JSON.stringify({
      server: {
        host: '127.0.0.1',
        // Every hot key a process holds is in each of its reports: 10,000 of them need frames
        // and an entry rate that large (see docs/keys.md, "At scale").
        limits: { maxFrameBytes: 4 * 2 ** 20, maxEntriesPerSec: 100_000 },
      },
      resources: [{ match: 'key/*', keyed: true, kind: 'rate', capacity, maxHotKeys: 2 * hotKeys }],
    }),
  )
  const coordinator = new CoordinatorProcess(config, await freePort())
  await coordinator.start()
  const idleMs = 5000
  const coldMs = seconds * 500
  const hotMs = seconds * 1000
  let lateWrites = 0
  const scrapes: { phase: string; s: Scrape }[] = []
  const waits: { phase: string; ms: number }[] = []
  const outs: WorkerOut[] = []
  try {
    const children = asks.map((hotPerKeyPerSec, i) => {
      const spec: ScaleWorkerSpec = {
        url: `ws://127.0.0.1:${coordinator.port}/v1/connect`,
        clientId: `gateway-${i}`,
        prefix: 'key',
        idleMs,
        coldMs,
        hotMs,
        tickMs: 50,
        coldPerSec: keysPerMin / 60 / asks.length,
        hotKeys,
        hotPerKeyPerSec,
        maxKeys: 50_000,
        maxKeysPerReport: 2000,
      }
      const out: WorkerOut = { seconds: [], errors: [] }
      outs.push(out)
      const child = spawn(
        process.execPath,
        ['--expose-gc', join(here, 'keys-scale-worker.js'), JSON.stringify(spec)],
        { stdio: ['ignore', 'pipe', 'inherit'] },
      )
      let buffer = ''
      child.stdout.on('data', (d: Buffer) => {
        buffer += d.toString()
        const lines = buffer.split('\n')
        buffer = lines.pop()!
        for (const line of lines) {
          const o = JSON.parse(line) as Record<string, unknown>
          if ('heap' in o) out.heap = o.heap as NonNullable<WorkerOut['heap']>
          else if ('hotLeased' in o) out.hotLeased = o.hotLeased as number
          else if ('error' in o) out.errors.push(String(o.error))
          else out.seconds.push(o as unknown as WorkerOut['seconds'][number])
        }
      })
      return new Promise<void>((resolve) => child.once('exit', () => resolve()))
    })
    const startMs = performance.now()
    const totalMs = idleMs + coldMs + hotMs + 1000
    // How long the coordinator keeps a trivial request waiting (/healthz, every 20 ms): its
    // event loop's longest turns, rounds of every hot key among them (#41: a family's round
    // runs in slices of `roundSliceMs`, coordinator/rounds.ts).
    const probing = (async () => {
      while (performance.now() - startMs < totalMs) {
        const at = performance.now()
        const ok = await fetch(`http://127.0.0.1:${coordinator.port}/healthz`)
          .then((r) => r.ok)
          .catch(() => false)
        const t = at - startMs - 1000
        const name = t < idleMs ? 'idle' : t < idleMs + coldMs ? 'cold' : 'hot'
        if (ok) waits.push({ phase: name, ms: performance.now() - at })
        await sleep(20)
      }
    })()
    for (let t = 1000; t < totalMs + 10_000; t += 1000) {
      await sleep(Math.max(0, startMs + t - performance.now()))
      const at = t - 1000 // the workers connect in about a second
      const name = at < idleMs ? 'idle' : at < idleMs + coldMs ? 'cold' : 'hot'
      scrapes.push({ phase: name, s: await scrape(coordinator.port) })
      if (t >= totalMs) break
    }
    await Promise.all(children)
    await probing
  } finally {
    lateWrites = coordinator.log.split('ledger write took longer').length - 1
    // BENCH_SCALE_LOG=1 (with SLUICE_FAULTS_LOG_LEVEL=info): the coordinator's warnings and errors.
    if (process.env.BENCH_SCALE_LOG === '1')
      for (const line of coordinator.log.split('\n'))
        if (/"level":(40|50)/.test(line)) console.error(line.slice(0, 400))
    await coordinator.stop()
    await rm(dir, { recursive: true, force: true })
  }
  const of = (name: string): ReturnType<typeof phase> =>
    phase(scrapes.filter((x) => x.phase === name).map((x) => x.s))
  const idle = of('idle')
  const cold = of('cold')
  const hot = of('hot')
  const perHotKeyBytes =
    ((hot.heapMb - cold.heapMb) * 2 ** 20) / Math.max(1, hot.hotKeys * asks.length)
  const perHotKeyRssBytes =
    ((hot.rssMb - cold.rssMb) * 2 ** 20) / Math.max(1, hot.hotKeys * asks.length)
  const f = (x: number, d = 1): string => x.toFixed(d)
  const waitsOf = (name: string): string => {
    const ms = waits
      .filter((w) => w.phase === name)
      .map((w) => w.ms)
      .sort((a, b) => a - b)
    const q = (p: number): string =>
      f(ms[Math.min(ms.length - 1, Math.floor(p * ms.length))] ?? NaN, 2)
    return `${q(0.5)} / ${q(0.99)} / ${q(1)}`
  }
  const rows = [
    '| phase | coordinator CPU % | coordinator RSS MB | coordinator heap MB | hot keys | holders | /healthz p50 / p99 / max ms |',
    '| --- | --- | --- | --- | --- | --- | --- |',
    `| idle: 2 processes hold the family, ask nothing | ${f(idle.cpuPercent)} | ${f(idle.rssMb)} | ${f(idle.heapMb)} | ${idle.hotKeys} | ${idle.holders} | ${waitsOf('idle')} |`,
    `| cold: ${keysPerMin.toLocaleString('en-US')} new keys a minute (${(keysPerMin / 60).toFixed(0)}/s), each asked for once | ${f(cold.cpuPercent)} | ${f(cold.rssMb)} | ${f(cold.heapMb)} | ${cold.hotKeys} | ${cold.holders} | ${waitsOf('cold')} |`,
    `| hot: the same, and ${hotKeys.toLocaleString('en-US')} keys asked for by both processes above their default share | ${f(hot.cpuPercent)} | ${f(hot.rssMb)} | ${f(hot.heapMb)} | ${hot.hotKeys} | ${hot.holders} | ${waitsOf('hot')} |`,
    '',
    `Coordinator memory per hot key per holding process: **${f(perHotKeyBytes, 0)} bytes** of heap (${f(perHotKeyRssBytes, 0)} of RSS); per cold key: ${f(((cold.heapMb - idle.heapMb) * 2 ** 20) / ((keysPerMin / 60) * (coldMs / 1000)), 2)} bytes of heap (${Math.round((keysPerMin / 60) * (coldMs / 1000)).toLocaleString('en-US')} cold keys seen, none reported).`,
    '',
    `Ledger writes that took longer than server.ledgerMaxWriteMs (their batches were not sent; the clients renewed at their next report): ${lateWrites}.`,
    '',
    '| process | keys tracked (maxKeys) | heap per tracked key | hot decisions/s | hot keys leased one by one | hot admitted/s of what max-min allows |',
    '| --- | --- | --- | --- | --- | --- |',
  ]
  // The pool's own share, measured in-process after full collections (the heap above also
  // holds the ledger's copy, the sockets' buffers and garbage not yet collected).
  const probe = JSON.parse(
    execFileSync(process.execPath, [
      '--expose-gc',
      join(here, 'keys-memory.js'),
      String(hotKeys),
    ]).toString(),
  ) as { bytesPerHotKeyPerHolder: number }
  rows.splice(
    rows.indexOf('') + 2,
    0,
    '',
    `Of which the pool (entries, the keys' settings, demand histories), measured in-process after full collections (\`node --expose-gc dist/bench/keys-memory.js ${hotKeys}\`): **${f(probe.bytesPerHotKeyPerHolder, 0)} bytes** per hot key per holding process.`,
  )
  const maxMin = maxMinShares(asks, capacity)
  outs.forEach((out, i) => {
    const hotSeconds = out.seconds.filter((s) => s.phase === 'hot').slice(5) // after the moves
    const admitted = hotSeconds.reduce((a, s) => a + s.hotAdmitted, 0) / hotSeconds.length
    const asked = hotSeconds.reduce((a, s) => a + s.hotAsked, 0) / hotSeconds.length
    const allowed = maxMin[i]! * hotKeys
    const heap = out.heap
    rows.push(
      `| gateway-${i} (asks ${asks[i]}/s of each hot key) | ${heap?.keys.toLocaleString('en-US') ?? '—'} | ${heap === undefined ? '—' : `${f((heap.after - heap.before) / heap.keys, 0)} bytes`} | ${Math.round(asked).toLocaleString('en-US')} | ${out.hotLeased ?? '—'} of ${hotKeys.toLocaleString('en-US')} | ${f((100 * admitted) / allowed)}% (${f(admitted, 0)} of ${f(allowed, 0)})${out.errors.length > 0 ? `; errors: ${[...new Set(out.errors)].join(', ')}` : ''} |`,
    )
  })
  return rows
}

/** Weighted max-min with equal weights: what each asker of `asks` gets of `capacity`. */
function maxMinShares(asks: readonly number[], capacity: number): number[] {
  const out = asks.map(() => 0)
  let left = capacity
  const order = asks.map((a, i) => ({ a, i })).sort((x, y) => x.a - y.a)
  order.forEach(({ a, i }, n) => {
    const fair = left / (order.length - n)
    out[i] = Math.min(a, fair)
    left -= out[i]
  })
  return out
}
