import { systemClock } from '../../shared/index.js'
import { hostMs } from './host-time.js'
import { workerClient } from './worker-client.js'

/** A client process of the quota fault scenario. */
export interface QuotaWorkerSpec {
  readonly url: string
  readonly clientId: string
  readonly resource: string
  /** Asks from this wall-clock time (ms since the epoch, as quota windows are) … */
  readonly fromWallMs: number
  /** … until this one. */
  readonly untilWallMs: number
  readonly tickMs: number
  /** Units this process asks for per second. */
  readonly ratePerSec: number
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
  const flush = (): void => log.flush()
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
  await new Promise<void>((resolve) =>
    systemClock.setTimeout(resolve, Math.max(0, spec.fromWallMs - Date.now())),
  )
  let owed = 0
  let last = systemClock.now()
  const timer = systemClock.setInterval(() => {
    const now = systemClock.now()
    owed += (spec.ratePerSec * (now - last)) / 1000
    last = now
    let admitted = 0
    let refused = 0
    for (; owed >= 1; owed--) {
      if (resource.tryAcquire()) admitted++
      else refused++
    }
    if (admitted + refused > 0)
      out.push(JSON.stringify({ t: hostMs(), w: Date.now(), admitted, refused }))
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
