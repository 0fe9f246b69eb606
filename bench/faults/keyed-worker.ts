import { seededRandom, zipf } from '../../shared/index.js'
import { hostMs } from './host-time.js'
import {
  askKeys,
  askKeysRemote,
  runWindowed,
  workerClient,
  type ZipfKeysSpec,
} from './worker-client.js'

/** A client process of the keyed fault scenario and benchmark. */
export interface KeyedWorkerSpec extends ZipfKeysSpec {
  readonly url: string
  readonly clientId: string
  readonly durationMs: number
  readonly tickMs: number
  /** Requests this process makes per second, over all keys. */
  readonly ratePerSec: number
  /** Checks through `decide` (the coordinator asked where this process's part cannot decide). */
  readonly remote?: boolean
}

/**
 * Asks for keys of a family at `ratePerSec`, Zipf-distributed, through
 * `tryAcquire` every tick, and logs on stdout, one JSON object a line: per
 * tick the keys admitted and refused (`{t, a: {key: n}, r: {key: n}}`), and
 * each key's first check (`{t, first: key, ok}`); with `remote`, through `decide`
 * (`askKeysRemote`). Stops by itself.
 */
async function main(): Promise<void> {
  const spec = JSON.parse(process.argv[2] ?? '{}') as KeyedWorkerSpec
  const { log, client } = workerClient(spec.url, spec.clientId)
  const { out } = log
  const family = client.keyed(spec.prefix)
  family.on('lease', (lease) => out.push(JSON.stringify({ t: hostMs(), share: lease.capacity })))
  family.on('mode', (mode) => out.push(JSON.stringify({ t: hostMs(), mode })))
  // As a gateway would: serve once the family lease is in (a first start serves at once).
  await family.ready({ timeoutMs: 10_000 }).catch(() => undefined)
  const draw = zipf(spec.keys, spec.zipfS, seededRandom(spec.seed))
  const seen = new Uint8Array(spec.keys)
  const fromWallMs = Date.now()
  await runWindowed(
    { ...spec, fromWallMs, untilWallMs: fromWallMs + spec.durationMs },
    log,
    client,
    spec.remote === true
      ? (units) => askKeysRemote(family, draw, units, seen, out)
      : (units) => askKeys(family, draw, units, seen, { t: hostMs() }, out),
  )
  // Answers that came in while the client closed (refused: no connection).
  log.flush()
}

await main()
process.exit(0)
