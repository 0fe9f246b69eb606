import { createClient, type KeyedFamily, type SluiceClient } from '../../client/index.js'
import { seededRandom, systemClock, zipf } from '../../shared/index.js'
import { hostMs } from '../faults/host-time.js'

/** A process of the efficiency bench: `gateways` clients behind a random balancer. */
export interface EfficiencyWorkerSpec {
  readonly url: string
  /** Client ids are `<clientIdBase>-<gateway>`. */
  readonly clientIdBase: string
  readonly gateways: number
  readonly prefix: string
  /** Keys k0 … k(n−1), drawn by Zipf(s). */
  readonly keys: number
  readonly zipfS: number
  readonly seed: number
  /** Requests this process makes per second, over all its gateways and keys. */
  readonly ratePerSec: number
  readonly tickMs: number
  /** Stops by itself at this wall-clock time (ms since the epoch). */
  readonly untilWallMs: number
  /** A customer's key asked for `count` times at `atWallMs`, each through a gateway at random. */
  readonly probe?: {
    readonly atWallMs: number
    readonly key: string
    readonly count: number
    /** Spread over this long (0: all in one tick, a burst). */
    readonly overMs: number
  }
  /** A gateway this young (ms since its `ready()`) counts as just joined for its first checks. */
  readonly youngMs: number
}

/**
 * Asks for keys at `ratePerSec`, each request through one of its gateways
 * at random, with `tryAcquire` (what a gateway's hot path does), and logs
 * on stdout one JSON line per tick: `{t, w, a, r, q, f, y}`: host
 * monotonic ms, wall ms, admitted and refused by key, admitted by key and
 * the window of the budget it came from (`key@window`, a quota), and first
 * checks of a key at a gateway (`f`: [checks, admitted]; `y`: the same at a
 * gateway younger than `youngMs`). A SIGTERM (a rolling deploy) closes
 * every client cleanly, as a gateway does on shutdown, and exits.
 */
async function main(): Promise<void> {
  const spec = JSON.parse(process.argv[2] ?? '{}') as EfficiencyWorkerSpec
  const out: string[] = []
  const flush = (): void => {
    if (out.length > 0) process.stdout.write(`${out.splice(0).join('\n')}\n`)
  }
  const clients: SluiceClient[] = []
  const families: KeyedFamily[] = []
  for (let g = 0; g < spec.gateways; g++) {
    const client = createClient({
      url: spec.url,
      clientId: `${spec.clientIdBase}-${g}`,
      backoffBaseMs: 100,
      backoffCapMs: 1000,
    })
    client.on('error', () => undefined)
    clients.push(client)
    families.push(client.keyed(spec.prefix))
  }
  // As a gateway would: serve once ready (a first start serves at once).
  await Promise.all(families.map((f) => f.ready({ timeoutMs: 10_000 }).catch(() => undefined)))
  const readyAt = hostMs()
  out.push(JSON.stringify({ t: readyAt, ready: spec.gateways }))
  flush()
  const random = seededRandom(spec.seed)
  const draw = zipf(spec.keys, spec.zipfS, random)
  const seen = families.map(() => new Uint8Array(spec.keys))
  let stopping = false
  const stop = async (): Promise<void> => {
    if (stopping) return
    stopping = true
    timer.cancel()
    flush()
    await Promise.all(clients.map((c) => c.close()))
    process.exit(0)
  }
  let owed = 0
  let last = systemClock.now()
  let probed = spec.probe === undefined
  let probeAsked = 0
  let probeAdmitted = 0
  const timer = systemClock.setInterval(() => {
    const now = systemClock.now()
    const t = hostMs()
    const w = Date.now()
    owed += (spec.ratePerSec * (now - last)) / 1000
    last = now
    const units = Math.floor(owed)
    owed -= units
    const a: Record<string, number> = {}
    const r: Record<string, number> = {}
    const q: Record<string, number> = {}
    const f: [number, number] = [0, 0]
    const y: [number, number] = [0, 0]
    const young = t - readyAt < spec.youngMs
    const ask = (key: string, k: number): void => {
      const g = Math.floor(random() * families.length)
      const family = families[g]!
      const ok = family.tryAcquire(key)
      if (ok) {
        a[key] = (a[key] ?? 0) + 1
        const window = family.leaseOf(key).window
        if (window !== undefined) q[`${key}@${window}`] = (q[`${key}@${window}`] ?? 0) + 1
      } else r[key] = (r[key] ?? 0) + 1
      if (k >= 0 && seen[g]![k] === 0) {
        seen[g]![k] = 1
        const into = young ? y : f
        into[0]++
        if (ok) into[1]++
      }
    }
    for (let i = 0; i < units; i++) {
      const k = draw()
      ask(`k${k}`, k)
    }
    if (!probed && w >= spec.probe!.atWallMs) {
      const p = spec.probe!
      // Asked so far: all at once, or at an even pace over overMs.
      const due =
        p.overMs <= 0
          ? p.count
          : Math.min(p.count, Math.floor((p.count * (w - p.atWallMs + spec.tickMs)) / p.overMs))
      const before = a[p.key] ?? 0
      for (; probeAsked < due; probeAsked++) ask(p.key, -1)
      probeAdmitted += (a[p.key] ?? 0) - before
      if (probeAsked >= p.count) {
        probed = true
        out.push(JSON.stringify({ t, probe: p.key, asked: p.count, admitted: probeAdmitted }))
      }
    }
    out.push(JSON.stringify({ t, w, a, r, q, f, y }))
    flush()
    if (w >= spec.untilWallMs) void stop()
  }, spec.tickMs)
  process.once('SIGTERM', () => void stop())
}

await main()
