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
    if (units <= 0) return
    // `i`: the window each unit was admitted in, as the client counts its spending (and the
    // coordinator its leases): read after each admission, since a tick may cross an edge with
    // the next window's block sent ahead (the lease in force follows it by a timer, so read
    // once after the tick it counted the next window's first units in the window before).
    // A unit admitted between two windows is spent from both (client/enforcer.ts): `j`, the
    // next window, counts it too (a close would say that window's count).
    const byWindow = new Map<string, { i: number | undefined; j?: number; admitted: number }>()
    let refused = 0
    for (let u = 0; u < units; u++) {
      if (!resource.tryAcquire()) {
        refused++
        continue
      }
      const i = resource.usedInWindow()?.window ?? resource.lease?.window?.index
      const atClose = resource.usedAtClose()?.window
      const j = i !== undefined && atClose !== undefined && atClose > i ? atClose : undefined
      const key = `${i}|${j}`
      const entry = byWindow.get(key) ?? { i, ...(j === undefined ? {} : { j }), admitted: 0 }
      entry.admitted++
      byWindow.set(key, entry)
    }
    const t = hostMs()
    const w = Date.now()
    if (byWindow.size === 0) {
      const i = resource.usedInWindow()?.window ?? resource.lease?.window?.index
      byWindow.set('', { i, admitted: 0 })
    }
    let first = true
    for (const e of byWindow.values()) {
      out.push(JSON.stringify({ t, w, ...e, refused: first ? refused : 0 }))
      first = false
    }
  })
}

await main()
process.exit(0)
