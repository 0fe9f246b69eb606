import {
  createClient,
  type KeyedFamily,
  type Resource,
  type SluiceClient,
} from '../../client/index.js'
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
  /**
   * Checks by `decide` (remote decisions: what a share cannot decide is asked of the
   * coordinator, as the HTTP edge and `check` do) rather than `tryAcquire` alone.
   */
  readonly remote?: boolean
  /** Each key a named resource `<prefix>/<key>` (`client.resource`), not a key of a family. */
  readonly named?: boolean
}

/** Remote decisions' latencies kept for the percentiles (the first ones; enough for p99). */
const maxLatencies = 200_000

/**
 * Asks for keys at `ratePerSec`, each request through one of its gateways
 * at random, with `tryAcquire` (what a gateway's hot path does), and logs
 * on stdout one JSON line per tick: `{t, w, a, r, q, f, y}`: host
 * monotonic ms, wall ms, admitted and refused by key, admitted by key and
 * the window of the budget it came from (`key@window`, a quota), and first
 * checks of a key at a gateway (`f`: [checks, admitted]; `y`: the same at a
 * gateway younger than `youngMs`). A SIGTERM (a rolling deploy) closes
 * every client cleanly, as a gateway does on shutdown, and exits.
 *
 * With `remote`, a check its gateway's share cannot decide is asked of the
 * coordinator (`family.decide`): it is logged, asked and answered, in the
 * tick its answer comes in, and its latency (ask to answer, host monotonic
 * ms) kept; the last line says `{latency: [p50, p99, asked]}`.
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
      // SLUICE_BENCH_RECONNECT_WAIT_MS: the client's reconnectWaitMs (its default without).
      ...(process.env.SLUICE_BENCH_RECONNECT_WAIT_MS === undefined
        ? {}
        : { reconnectWaitMs: Number(process.env.SLUICE_BENCH_RECONNECT_WAIT_MS) }),
    })
    client.on('error', () => undefined)
    // With SLUICE_BENCH_WHY=1, when each gateway's connection came and went (wall ms).
    if (process.env.SLUICE_BENCH_WHY === '1')
      for (const ev of ['connect', 'disconnect'] as const)
        client.on(ev, () => out.push(JSON.stringify({ ev, g, wall: Date.now() })))
    clients.push(client)
    if (spec.named !== true) families.push(client.keyed(spec.prefix))
  }
  // Named: every resource at every gateway from the start, as a service declares its limits.
  const named = clients.map((c) => {
    const byKey = new Map<string, Resource>()
    if (spec.named === true)
      for (let k = 0; k < spec.keys; k++) byKey.set(`k${k}`, c.resource(`${spec.prefix}/k${k}`))
    return byKey
  })
  const resourceOf = (g: number, key: string): Resource => named[g]!.get(key)!
  // As a gateway would: serve once ready (a first start serves at once).
  await Promise.all([
    ...families.map((f) => f.ready({ timeoutMs: 10_000 }).catch(() => undefined)),
    ...named.flatMap((m) =>
      [...m.values()].map((r) => r.ready({ timeoutMs: 10_000 }).catch(() => undefined)),
    ),
  ])
  const readyAt = hostMs()
  out.push(JSON.stringify({ t: readyAt, ready: spec.gateways }))
  flush()
  const random = seededRandom(spec.seed)
  const draw = zipf(spec.keys, spec.zipfS, random)
  const seen = clients.map(() => new Uint8Array(spec.keys))
  let stopping = false
  const stop = async (): Promise<void> => {
    if (stopping) return
    stopping = true
    timer.cancel()
    if (spec.probe !== undefined && probed)
      out.push(
        JSON.stringify({
          t: hostMs(),
          probe: spec.probe.key,
          asked: probeAsked,
          admitted: probeAdmitted,
        }),
      )
    if (spec.remote === true) {
      const sorted = latencies.slice().sort((x, y) => x - y)
      const trips = roundTrips.slice().sort((x, y) => x - y)
      const at = (list: number[], p: number): number =>
        list[Math.min(list.length - 1, Math.floor(p * list.length))] ?? 0
      out.push(
        JSON.stringify({
          t: hostMs(),
          latency: [at(sorted, 0.5), at(sorted, 0.99), remoteAsked, at(trips, 0.99)],
        }),
      )
    }
    flush()
    await Promise.all(clients.map((c) => c.close()))
    process.exit(0)
  }
  const latencies: number[] = []
  /** Of each remote answer, the time from its last send (a wait for a connection left out). */
  const roundTrips: number[] = []
  let remoteAsked = 0
  const debugKeys = (process.env.SLUICE_BENCH_DEBUG_KEYS ?? '').split(',').filter((k) => k !== '')
  let debugAt = 0
  const debugEveryMs = Number(process.env.SLUICE_BENCH_DEBUG_EVERY_MS ?? 1000)
  // What remote answers brought in since the last tick's line, by the tick they were asked in:
  // logged with the next tick, stamped with the time they were asked (the central limiter
  // replays a check when it was asked, however long its answer waited) and `dt`, how much later
  // the answer came (the bound is checked at the answer).
  const fresh = () => ({
    a: {} as Record<string, number>,
    r: {} as Record<string, number>,
    q: {} as Record<string, number>,
    f: [0, 0] as [number, number],
    y: [0, 0] as [number, number],
    /** The keys of first checks refused, at a gateway young or not (`yr`, `fr`): judged against the central limiter. */
    yr: undefined as string[] | undefined,
    fr: undefined as string[] | undefined,
    /** The keys of first checks admitted at a young gateway: whether their key was at its limit then. */
    ya: undefined as string[] | undefined,
  })
  let late = new Map<number, { w: number; into: ReturnType<typeof fresh> }>()
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
    const answered = late
    late = new Map()
    const here = fresh()
    const young = t - readyAt < spec.youngMs
    const count = (
      into: ReturnType<typeof fresh>,
      family: KeyedFamily | undefined,
      g: number,
      key: string,
      k: number,
      ok: boolean,
      first: boolean,
      remoteWindow?: number,
    ): void => {
      if (ok) {
        if (key === spec.probe?.key) probeAdmitted++
        into.a[key] = (into.a[key] ?? 0) + 1
        // A remote admission's window is the coordinator's part's (its answer says it); a named
        // quota's, the budget's it was spent from (a next window's sent ahead is in force before
        // its lease is the resource's).
        const window =
          spec.named === true
            ? resourceOf(g, key).usedInWindow()?.window
            : (remoteWindow ?? family!.leaseOf(key).window)
        if (window !== undefined) into.q[`${key}@${window}`] = (into.q[`${key}@${window}`] ?? 0) + 1
      } else into.r[key] = (into.r[key] ?? 0) + 1
      if (first) {
        const firsts = young ? into.y : into.f
        firsts[0]++
        if (ok) {
          firsts[1]++
          if (young) (into.ya ??= []).push(key)
        } else if (young) (into.yr ??= []).push(key)
        else (into.fr ??= []).push(key)
      }
    }
    const ask = (key: string, k: number): void => {
      const g = Math.floor(random() * clients.length)
      const family = families[g]
      const first = k >= 0 && seen[g]![k] === 0
      if (first) seen[g]![k] = 1
      if (spec.named === true)
        return count(here, family, g, key, k, resourceOf(g, key).tryAcquire(), first)
      if (spec.remote !== true)
        return count(here, family, g, key, k, family!.tryAcquire(key), first)
      const decided = family!.decide(key)
      if (typeof decided === 'boolean') {
        if (!decided) why.l++
        return count(here, family, g, key, k, decided, first)
      }
      remoteAsked++
      const askedAt = hostMs()
      void decided.then((answer) => {
        if (latencies.length < maxLatencies) {
          latencies.push(hostMs() - askedAt)
          roundTrips.push(answer.roundTripMs ?? hostMs() - askedAt)
        }
        if (!answer.admitted) {
          if (answer.retryAfterMs === 0) why.ru++
          else why.rr++
        } else why.ra++
        let group = late.get(t)
        if (group === undefined) late.set(t, (group = { w, into: fresh() }))
        count(group.into, family, g, key, k, answer.admitted, first, answer.window)
      })
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
      for (; probeAsked < due; probeAsked++) ask(p.key, -1)
      // Said at the end: a remote answer may still be on its way.
      if (probeAsked >= p.count) probed = true
    }
    const line = (
      at: number,
      atW: number,
      into: ReturnType<typeof fresh>,
      extra: Record<string, unknown>,
    ): string =>
      JSON.stringify({
        t: at,
        w: atW,
        ...extra,
        a: into.a,
        r: into.r,
        q: into.q,
        f: into.f,
        y: into.y,
        ...(into.yr === undefined ? {} : { yr: into.yr }),
        ...(into.fr === undefined ? {} : { fr: into.fr }),
        ...(into.ya === undefined ? {} : { ya: into.ya }),
      })
    for (const [askedAt, group] of answered)
      out.push(line(askedAt, group.w, group.into, { dt: t - askedAt }))
    out.push(line(t, w, here, process.env.SLUICE_BENCH_WHY === '1' ? { why: takeWhy() } : {}))
    if (debugKeys.length > 0 && t - debugAt >= debugEveryMs) {
      debugAt = t
      const dbg: Record<string, unknown> = {}
      for (const key of debugKeys)
        dbg[key] = families.map((fam) => {
          const l = fam.leaseOf(key)
          return [
            l.source,
            +l.capacity.toFixed(3),
            +l.burst.toFixed(2),
            fam.remaining(key),
            l.window ?? -1,
          ]
        })
      out.push(JSON.stringify({ t, dbg }))
    }
    flush()
    if (w >= spec.untilWallMs) void stop()
  }, spec.tickMs)
  process.once('SIGTERM', () => void stop())
}

/**
 * With SLUICE_BENCH_WHY=1, each tick line also says how the remote checks since the last went
 * (`why`): refused here without asking (`l`), asked and refused with a time to wait (`rr`),
 * asked and not answered (`ru`: no connection), asked and admitted (`ra`). What told a
 * coordinator's outage (all `ru`) from its part refusing at a window's edge (all `rr`) in #41.
 */
let why = { l: 0, rr: 0, ru: 0, ra: 0 }
function takeWhy(): typeof why {
  const w = why
  why = { l: 0, rr: 0, ru: 0, ra: 0 }
  return w
}

await main()
