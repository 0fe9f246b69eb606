import { seededRandom, zipf } from '../../shared/index.js'
import { hostMs } from './host-time.js'
import { runWindowed, workerClient, type WindowedWorkerSpec } from './worker-client.js'

/** A client process of the keyed quota fault scenario (`ratePerSec`: requests over all keys). */
export interface KeyedQuotaWorkerSpec extends WindowedWorkerSpec {
  /** The family's prefix (its template's match without /*). */
  readonly prefix: string
  /** The quota's window: a key's first check is logged once a window. */
  readonly windowMs: number
  /** Keys k0 … k(n−1), drawn by Zipf(s): k0 the most asked for. */
  readonly keys: number
  readonly zipfS: number
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
  const family = client.keyed(spec.prefix)
  family.on('lease', (lease) =>
    out.push(JSON.stringify({ t: hostMs(), share: lease.capacity, window: lease.window?.index })),
  )
  await family.ready({ timeoutMs: 10_000 }).catch(() => undefined)
  const draw = zipf(spec.keys, spec.zipfS, seededRandom(spec.seed))
  // The keys checked in the current window (a key's first check is logged once a window).
  let seen = new Uint8Array(spec.keys)
  let window = -1
  await runWindowed(spec, log, client, (units) => {
    const admitted: Record<string, number> = {}
    const refused: Record<string, number> = {}
    const w = Date.now()
    if (Math.floor(w / spec.windowMs) !== window) {
      window = Math.floor(w / spec.windowMs)
      seen = new Uint8Array(spec.keys)
    }
    for (let i = 0; i < units; i++) {
      const k = draw()
      const ok = family.tryAcquire(`k${k}`)
      if (seen[k] === 0) {
        seen[k] = 1
        out.push(JSON.stringify({ w, first: k, ok }))
      }
      const into = ok ? admitted : refused
      into[k] = (into[k] ?? 0) + 1
    }
    if (units > 0) out.push(JSON.stringify({ w, a: admitted, r: refused }))
  })
}

await main()
process.exit(0)
