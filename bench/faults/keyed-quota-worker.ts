import { seededRandom, zipf } from '../../shared/index.js'
import { hostMs } from './host-time.js'
import {
  askKeys,
  runWindowed,
  workerClient,
  type WindowedWorkerSpec,
  type ZipfKeysSpec,
} from './worker-client.js'

/** A client process of the keyed quota fault scenario (`ratePerSec`: requests over all keys). */
export interface KeyedQuotaWorkerSpec extends WindowedWorkerSpec, ZipfKeysSpec {
  /** The quota's window: a key's first check is logged once a window. */
  readonly windowMs: number
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
  // The newest window this process was leased in: what the coordinator counts its admissions in.
  let leased: number | undefined
  family.on('lease', (lease) => {
    if (lease.window !== undefined && !(lease.window.index < (leased ?? -Infinity)))
      leased = lease.window.index
    out.push(JSON.stringify({ t: hostMs(), share: lease.capacity, window: lease.window?.index }))
  })
  await family.ready({ timeoutMs: 10_000 }).catch(() => undefined)
  const draw = zipf(spec.keys, spec.zipfS, seededRandom(spec.seed))
  // The keys checked in the current window (a key's first check is logged once a window).
  let seen = new Uint8Array(spec.keys)
  let window = -1
  /** The tick just logged (`{a: {key: n}}`), its admissions by the window of each key's budget. */
  const windowsOf = (line: string): Record<string, Record<string, number>> => {
    const admitted = (JSON.parse(line) as { a?: Record<string, number> }).a ?? {}
    const out: Record<string, Record<string, number>> = {}
    for (const [k, n] of Object.entries(admitted)) {
      const window = String(family.leaseOf(`k${k}`).window ?? 'none')
      ;(out[window] ??= {})[k] = n
    }
    return out
  }
  await runWindowed(spec, log, client, (units) => {
    const w = Date.now()
    if (Math.floor(w / spec.windowMs) !== window) {
      window = Math.floor(w / spec.windowMs)
      seen = new Uint8Array(spec.keys)
    }
    askKeys(family, draw, units, seen, leased === undefined ? { w } : { w, i: leased }, out)
    // Each admission's window as this process enforced it (the key's budget in force): what the
    // coordinator counts it in, exactly, whatever the clocks say.
    if (units > 0) out.push(JSON.stringify({ w, byWindow: windowsOf(out.at(-1)!) }))
  })
}

await main()
process.exit(0)
