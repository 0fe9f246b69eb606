import { seededRandom, systemClock, zipf } from '../../shared/index.js'
import { hostMs } from './host-time.js'
import { workerClient } from './worker-client.js'

/** A client process of the keyed quota fault scenario. */
export interface KeyedQuotaWorkerSpec {
  readonly url: string
  readonly clientId: string
  /** The family's prefix (its template's match without /*). */
  readonly prefix: string
  /** Asks from this wall-clock time (ms since the epoch, as quota windows are) … */
  readonly fromWallMs: number
  /** … until this one. */
  readonly untilWallMs: number
  readonly tickMs: number
  /** The quota's window: a key's first check is logged once a window. */
  readonly windowMs: number
  /** Keys k0 … k(n−1), drawn by Zipf(s): k0 the most asked for. */
  readonly keys: number
  readonly zipfS: number
  /** Requests this process makes per second, over all keys. */
  readonly ratePerSec: number
  readonly seed: number
}

/**
 * Asks for keys of a keyed quota at `ratePerSec`, Zipf-distributed, through `tryAcquire` every
 * tick, and logs on stdout, one JSON object a line: per tick the wall-clock time (`w`, what
 * windows are counted on) and the keys admitted and refused (`a`, `r`: key → count); each
 * key's first check in each window (`first`, `ok`). Asks from `fromWallMs` (at once for a restarted process)
 * and stops by itself at `untilWallMs`.
 */
async function main(): Promise<void> {
  const spec = JSON.parse(process.argv[2] ?? '{}') as KeyedQuotaWorkerSpec
  const { log, client } = workerClient(spec.url, spec.clientId)
  const { out } = log
  const flush = (): void => log.flush()
  const family = client.keyed(spec.prefix)
  family.on('lease', (lease) =>
    out.push(JSON.stringify({ t: hostMs(), share: lease.capacity, window: lease.window?.index })),
  )
  await family.ready({ timeoutMs: 10_000 }).catch(() => undefined)
  await new Promise<void>((resolve) =>
    systemClock.setTimeout(resolve, Math.max(0, spec.fromWallMs - Date.now())),
  )
  const draw = zipf(spec.keys, spec.zipfS, seededRandom(spec.seed))
  // The keys checked in the current window (a key's first check is logged once a window).
  let seen = new Uint8Array(spec.keys)
  let window = -1
  let owed = 0
  let last = systemClock.now()
  const timer = systemClock.setInterval(() => {
    const now = systemClock.now()
    owed += (spec.ratePerSec * (now - last)) / 1000
    last = now
    const admitted: Record<string, number> = {}
    const refused: Record<string, number> = {}
    const w = Date.now()
    if (Math.floor(w / spec.windowMs) !== window) {
      window = Math.floor(w / spec.windowMs)
      seen = new Uint8Array(spec.keys)
    }
    let any = false
    for (; owed >= 1; owed--) {
      const k = draw()
      const ok = family.tryAcquire(`k${k}`)
      if (seen[k] === 0) {
        seen[k] = 1
        out.push(JSON.stringify({ w, first: k, ok }))
      }
      const into = ok ? admitted : refused
      into[k] = (into[k] ?? 0) + 1
      any = true
    }
    if (any) out.push(JSON.stringify({ w, a: admitted, r: refused }))
    // Every tick: a pipe is written synchronously on Linux, so a SIGKILL loses no admission.
    flush()
  }, spec.tickMs)
  await new Promise<void>((resolve) =>
    systemClock.setTimeout(resolve, Math.max(0, spec.untilWallMs - Date.now())),
  )
  timer.cancel()
  flush()
  await client.close()
}

await main()
process.exit(0)
