import { hostMs } from './host-time.js'
import { runWindowed, workerClient, type WindowedWorkerSpec } from './worker-client.js'

/** A client process of the quota fault scenario. */
export interface QuotaWorkerSpec extends WindowedWorkerSpec {
  readonly resource: string
}

/**
 * Asks for units of a quota at `ratePerSec` through `tryAcquire` every tick, and logs on stdout,
 * one JSON object a line: per tick the wall-clock time (`w`, what windows are counted on), the
 * host's monotonic time (`t`) and the units admitted and refused; each lease's budget and window.
 * Asks from `fromWallMs` (at once for a restarted process) and stops by itself at `untilWallMs`.
 */
async function main(): Promise<void> {
  const spec = JSON.parse(process.argv[2] ?? '{}') as QuotaWorkerSpec
  const { log, client } = workerClient(spec.url, spec.clientId)
  const { out } = log
  const resource = client.resource(spec.resource, { kind: 'quota' })
  resource.on('lease', (lease) =>
    out.push(
      JSON.stringify({
        t: hostMs(),
        w: Date.now(),
        budget: lease.capacity,
        window: lease.window?.index,
      }),
    ),
  )
  await runWindowed(spec, log, client, (units) => {
    let admitted = 0
    for (let i = 0; i < units; i++) if (resource.tryAcquire()) admitted++
    // `i`: the window of the lease in force (what the coordinator counts the admission in).
    const i = resource.lease?.window?.index
    if (units > 0)
      out.push(
        JSON.stringify({ t: hostMs(), w: Date.now(), i, admitted, refused: units - admitted }),
      )
  })
}

await main()
process.exit(0)
