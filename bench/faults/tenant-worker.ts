import { createClient } from '../../client/index.js'
import { systemClock } from '../../shared/index.js'
import { hostMs } from './host-time.js'

/** What an honest client process of the hostile-tenant scenarios asks for. */
export interface TenantWorkerSpec {
  readonly url: string
  readonly token?: string | undefined
  readonly clientId: string
  readonly durationMs: number
  readonly tickMs: number
  /** The keyed family's prefix. */
  readonly prefix: string
  /** One key asked for at `ratePerSec` (a busy customer), from `fromMs` after the start on. */
  readonly hotKey?:
    | { readonly key: string; readonly ratePerSec: number; readonly fromMs?: number | undefined }
    | undefined
  /** A new key first checked this often per second (new customers), each asked once. */
  readonly newKeysPerSec?: number | undefined
  /** An ordinary rate resource asked for at `ratePerSec`. */
  readonly plain?: { readonly id: string; readonly ratePerSec: number } | undefined
  /** A named quota asked for at `ratePerSec`. */
  readonly quota?: { readonly id: string; readonly ratePerSec: number } | undefined
  /** A new key every `everyMs`, each asked for during `lifeMs` at `ratePerSec`, then never again. */
  readonly rolling?:
    { readonly everyMs: number; readonly lifeMs: number; readonly ratePerSec: number } | undefined
}

/** A counter owed whole units at a rate, tick by tick. */
class Pace {
  #owed = 0
  constructor(readonly ratePerSec: number) {}
  units(elapsedMs: number): number {
    this.#owed += (this.ratePerSec * elapsedMs) / 1000
    const n = Math.floor(this.#owed)
    this.#owed -= n
    return n
  }
}

/**
 * `node tenant-worker.js SPEC_JSON`: asks through `tryAcquire` every tick and
 * logs on stdout, one JSON object a line: each connect and disconnect (with
 * the close code), and once a second what it asked and was admitted of each
 * thing (`hot`, `first`, `plain`, `quota`, `rolling`: `[admitted, asked]`).
 * Stops by itself.
 */
async function main(): Promise<void> {
  const spec = JSON.parse(process.argv[2] ?? '{}') as TenantWorkerSpec
  const out: string[] = []
  const log = (o: Record<string, unknown>): void => {
    out.push(JSON.stringify({ t: hostMs(), ...o }))
  }
  const client = createClient({
    url: spec.url,
    clientId: spec.clientId,
    ...(spec.token === undefined ? {} : { token: spec.token }),
    backoffBaseMs: 100,
    backoffCapMs: 1000,
  })
  client.on('connect', () => log({ connected: true }))
  client.on('disconnect', (code) => log({ connected: false, code }))
  client.on('error', (e) => log({ error: e.code }))
  const family = client.keyed(spec.prefix)
  const plain = spec.plain === undefined ? undefined : client.resource(spec.plain.id)
  const quota =
    spec.quota === undefined ? undefined : client.resource(spec.quota.id, { kind: 'quota' })
  await Promise.all([
    family.ready({ timeoutMs: 10_000 }),
    plain?.ready({ timeoutMs: 10_000 }),
    quota?.ready({ timeoutMs: 10_000 }),
  ]).catch(() => undefined)
  const hot = new Pace(spec.hotKey?.ratePerSec ?? 0)
  const fresh = new Pace(spec.newKeysPerSec ?? 0)
  const plainPace = new Pace(spec.plain?.ratePerSec ?? 0)
  const quotaPace = new Pace(spec.quota?.ratePerSec ?? 0)
  const rollingPace = new Pace(spec.rolling?.ratePerSec ?? 0)
  const counts = { hot: [0, 0], first: [0, 0], plain: [0, 0], quota: [0, 0], rolling: [0, 0] }
  const count = (what: keyof typeof counts, ok: boolean): void => {
    counts[what][1]!++
    if (ok) counts[what][0]!++
  }
  let newKey = 0
  const startMs = systemClock.now()
  let last = startMs
  let lastLogMs = startMs
  const timer = systemClock.setInterval(() => {
    const now = systemClock.now()
    const elapsed = now - last
    last = now
    if (now - startMs >= (spec.hotKey?.fromMs ?? 0))
      for (let i = hot.units(elapsed); i > 0; i--) count('hot', family.tryAcquire(spec.hotKey!.key))
    for (let i = fresh.units(elapsed); i > 0; i--)
      count('first', family.tryAcquire(`${spec.clientId}-new-${newKey++}`))
    for (let i = plainPace.units(elapsed); i > 0; i--) count('plain', plain!.tryAcquire())
    for (let i = quotaPace.units(elapsed); i > 0; i--) count('quota', quota!.tryAcquire())
    if (spec.rolling !== undefined) {
      // Keys r(n) for n with n·everyMs ≤ elapsed < n·everyMs + lifeMs are being asked for now.
      const sinceMs = now - startMs
      const newest = Math.floor(sinceMs / spec.rolling.everyMs)
      const oldest = Math.max(0, Math.ceil((sinceMs - spec.rolling.lifeMs) / spec.rolling.everyMs))
      const live = Math.max(1, newest - oldest + 1)
      for (let i = rollingPace.units(elapsed) * live; i > 0; i--)
        count('rolling', family.tryAcquire(`r${oldest + (i % live)}`))
    }
    if (now - lastLogMs >= 1000) {
      lastLogMs = now
      log({ ...counts, hotKeys: family.size })
      for (const c of Object.values(counts)) c.fill(0)
      process.stdout.write(`${out.splice(0).join('\n')}\n`)
    }
  }, spec.tickMs)
  await new Promise((resolve) => systemClock.setTimeout(() => resolve(undefined), spec.durationMs))
  timer.cancel()
  if (out.length > 0) process.stdout.write(`${out.splice(0).join('\n')}\n`)
  await client.close()
}

await main()
process.exit(0)
