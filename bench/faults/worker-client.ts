import { createClient, type KeyedFamily, type SluiceClient } from '../../client/index.js'
import { systemClock } from '../../shared/index.js'
import { hostMs } from './host-time.js'

/** What a fault worker logs: JSON lines on stdout, written when `flush` is called. */
export interface WorkerLog {
  readonly out: string[]
  flush(): void
}

/** A fault worker's log and client: quick reconnects, each connect and disconnect logged. */
export function workerClient(
  url: string,
  clientId: string,
): { log: WorkerLog; client: SluiceClient } {
  const out: string[] = []
  const log: WorkerLog = {
    out,
    flush: () => {
      if (out.length > 0) process.stdout.write(`${out.splice(0).join('\n')}\n`)
    },
  }
  const client = createClient({
    url,
    clientId,
    backoffBaseMs: 100,
    backoffCapMs: 1000,
    connectTimeoutMs: 2000,
  })
  client.on('error', () => undefined)
  client.on('connect', () => out.push(JSON.stringify({ t: hostMs(), connected: true })))
  client.on('disconnect', () => out.push(JSON.stringify({ t: hostMs(), connected: false })))
  return { log, client }
}

/** What a worker that asks over wall-clock windows is told: where, as whom, when, how often. */
export interface WindowedWorkerSpec {
  readonly url: string
  readonly clientId: string
  /** Asks from this wall-clock time (ms since the epoch, as quota windows are) … */
  readonly fromWallMs: number
  /** … until this one. */
  readonly untilWallMs: number
  readonly tickMs: number
  /** Units this process asks for per second. */
  readonly ratePerSec: number
}

/**
 * Waits until `spec.fromWallMs` (at once for a restarted process), then calls `tick` every
 * `spec.tickMs` with the whole units owed at `spec.ratePerSec` since the last tick, and flushes
 * the log after each (a pipe is written synchronously on Linux, so a SIGKILL loses no
 * admission); stops by itself at `spec.untilWallMs`, flushes and closes the client.
 */
export async function runWindowed(
  spec: WindowedWorkerSpec,
  log: WorkerLog,
  client: SluiceClient,
  tick: (units: number) => void,
): Promise<void> {
  const untilWall = (wallMs: number): Promise<void> =>
    new Promise<void>((resolve) =>
      systemClock.setTimeout(resolve, Math.max(0, wallMs - Date.now())),
    )
  await untilWall(spec.fromWallMs)
  let owed = 0
  let last = systemClock.now()
  const timer = systemClock.setInterval(() => {
    const now = systemClock.now()
    owed += (spec.ratePerSec * (now - last)) / 1000
    last = now
    const units = Math.floor(owed)
    owed -= units
    tick(units)
    log.flush()
  }, spec.tickMs)
  await untilWall(spec.untilWallMs)
  timer.cancel()
  log.flush()
  await client.close()
}

/** What a worker that asks for a family's keys is told of them. */
export interface ZipfKeysSpec {
  /** The family's prefix (its template's match without /*). */
  readonly prefix: string
  /** Keys k0 … k(n−1), drawn by Zipf(s): k0 the most asked for. */
  readonly keys: number
  readonly zipfS: number
  readonly seed: number
}

/**
 * One tick of a keyed worker: `units` keys drawn by `draw`, each checked with `tryAcquire`; a
 * key's first check (`seen[k]` still 0) logged as `{...stamp, first, ok}`, then the tick's
 * admitted and refused by key as `{...stamp, a, r}`.
 */
export function askKeys(
  family: KeyedFamily,
  draw: () => number,
  units: number,
  seen: Uint8Array,
  stamp: Readonly<Record<string, number>>,
  out: string[],
): void {
  if (units <= 0) return
  const admitted: Record<string, number> = {}
  const refused: Record<string, number> = {}
  for (let i = 0; i < units; i++) {
    const k = draw()
    const ok = family.tryAcquire(`k${k}`)
    if (seen[k] === 0) {
      seen[k] = 1
      // A refused first check says what the process held of the key then (for a look afterwards).
      out.push(
        JSON.stringify(
          ok
            ? { ...stamp, first: k, ok }
            : { ...stamp, first: k, ok, held: family.leaseOf(`k${k}`) },
        ),
      )
    }
    const into = ok ? admitted : refused
    into[k] = (into[k] ?? 0) + 1
  }
  out.push(JSON.stringify({ ...stamp, a: admitted, r: refused }))
}

/**
 * `askKeys` through `decide` (the HTTP edge's and `check`'s path): a check decided here is
 * logged in the tick's line; one the coordinator decides is logged when its answer comes, as
 * `{t, a|r: {key: 1}, lat}` (`t` the answer's time, `lat` ms since it was asked), its first
 * check then too.
 */
export function askKeysRemote(
  family: KeyedFamily,
  draw: () => number,
  units: number,
  seen: Uint8Array,
  out: string[],
): void {
  if (units <= 0) return
  const admitted: Record<string, number> = {}
  const refused: Record<string, number> = {}
  const t = hostMs()
  for (let i = 0; i < units; i++) {
    const k = draw()
    const first = seen[k] === 0
    seen[k] = 1
    const decided = family.decide(`k${k}`)
    if (typeof decided === 'boolean') {
      if (first) out.push(JSON.stringify({ t, first: k, ok: decided }))
      const into = decided ? admitted : refused
      into[k] = (into[k] ?? 0) + 1
      continue
    }
    void decided.then((answer) => {
      const at = hostMs()
      const ok = answer.admitted
      // A refusal says the coordinator's retry-after (`ra`, -1: none, as for a family its part
      // holds nothing of yet), for a look afterwards.
      const ra = ok ? {} : { ra: Number.isFinite(answer.retryAfterMs) ? answer.retryAfterMs : -1 }
      if (first) out.push(JSON.stringify({ t: at, first: k, ok, ...ra }))
      // `rt`: from its last send (a wait for a connection before it is not in it).
      const rt = answer.roundTripMs ?? at - t
      out.push(JSON.stringify({ t: at, [ok ? 'a' : 'r']: { [k]: 1 }, lat: at - t, rt, ...ra }))
    })
  }
  out.push(JSON.stringify({ t, a: admitted, r: refused }))
}
