import { createClient } from '../../client/index.js'
import { systemClock, type FailureMode, type ResourceKind } from '../../shared/index.js'
import { hostMs } from './host-time.js'

/** What one worker process does: one client, its resources, a steady or moving demand, for a while. */
export interface WorkerSpec {
  readonly url: string
  readonly clientId: string
  readonly token?: string | undefined
  readonly durationMs: number
  readonly tickMs: number
  readonly resources: readonly {
    readonly id: string
    readonly kind: ResourceKind
    /** Rate: tokens asked per second; concurrency: slots wanted at once. */
    readonly wants: number
    readonly failureMode: FailureMode
    /** Concurrency: how long each slot is held, ms. */
    readonly holdMs?: number | undefined
    /** Rate: demand moves within ±swing·wants, a new value every 250 ms (reported as wants). */
    readonly swing?: number | undefined
  }[]
}

/** A fraction in [0, 1) for step `n` of client `id`: the same for every run (no Math.random). */
function jitter(id: string, n: number): number {
  let h = 2166136261 ^ n
  for (let i = 0; i < id.length; i++) h = Math.imul(h ^ id.charCodeAt(i), 16777619)
  h = Math.imul(h ^ (h >>> 15), 2246822507)
  return ((h ^ (h >>> 13)) >>> 0) / 2 ** 32
}

/**
 * A client process of the fault suite. It asks for its demand every tick
 * (rate: tokens one at a time through `tryAcquire`; concurrency: slots held
 * for `holdMs`) and logs, one JSON object a line on stdout, what it admitted
 * and when on the host's monotonic clock, plus its lease and mode changes.
 * Bounded: it stops by itself after `durationMs`.
 */
async function main(): Promise<void> {
  const spec = JSON.parse(process.argv[2] ?? '{}') as WorkerSpec
  const out: string[] = []
  // Each event is stamped with the time read just before the call that makes it happen: a slot's
  // release sends the ack that lets another process take it, so stamping after the call could
  // put the release after that take when this process is preempted in between.
  const log = (record: Record<string, unknown>, t = hostMs()): void => {
    out.push(JSON.stringify({ t, ...record }))
    if (out.length >= 256) flush()
  }
  const flush = (): void => {
    if (out.length > 0) process.stdout.write(`${out.splice(0).join('\n')}\n`)
  }
  const client = createClient({
    url: spec.url,
    clientId: spec.clientId,
    token: spec.token,
    backoffBaseMs: 100,
    backoffCapMs: 1000,
    connectTimeoutMs: 2000,
  })
  client.on('error', (error: Error & { code?: string }) => log({ error: error.code }))
  client.on('connect', () => log({ connected: client.clientId }))
  client.on('disconnect', (code: number) => log({ disconnected: code }))
  const runs = spec.resources.map((r) => {
    const handle = client.resource(r.id, {
      wants: r.wants,
      failureMode: r.failureMode,
      kind: r.kind,
    })
    handle.on('mode', (mode: string) => log({ r: r.id, mode, capacity: handle.capacity }))
    handle.on('lease', (lease: { capacity: number }) => log({ r: r.id, lease: lease.capacity }))
    return { spec: r, handle, owed: 0, held: [] as number[], wants: r.wants }
  })
  // Moving demand: a new value every 250 ms within ±swing of wants, told to the client.
  let step = 0
  const swings = runs.filter((run) => (run.spec.swing ?? 0) > 0)
  const mover =
    swings.length === 0
      ? undefined
      : systemClock.setInterval(() => {
          step++
          for (const run of swings) {
            const swing = run.spec.swing!
            run.wants = run.spec.wants * (1 - swing + 2 * swing * jitter(spec.clientId, step))
            run.handle.setWants(run.wants)
          }
        }, 250)
  let last = systemClock.now()
  const timer = systemClock.setInterval(() => {
    const now = systemClock.now()
    const elapsedMs = now - last
    last = now
    for (const run of runs) {
      const { spec: r, handle } = run
      if (r.kind === 'rate') {
        run.owed += (run.wants * elapsedMs) / 1000
        const asked = Math.floor(run.owed)
        run.owed -= asked
        const t = hostMs()
        let admitted = 0
        for (let i = 0; i < asked; i++) if (handle.tryAcquire(1)) admitted++
        if (admitted > 0) log({ r: r.id, a: admitted }, t)
        continue
      }
      while (run.held.length > 0 && run.held[0]! <= now) {
        run.held.shift()
        const t = hostMs()
        handle.releaseSlots(1)
        log({ r: r.id, s: -1 }, t)
      }
      for (;;) {
        const t = hostMs()
        if (run.held.length >= r.wants || !handle.tryAcquire(1)) break
        run.held.push(now + (r.holdMs ?? 200))
        log({ r: r.id, s: 1 }, t)
      }
    }
  }, spec.tickMs)
  await new Promise<void>((resolve) => systemClock.setTimeout(resolve, spec.durationMs))
  timer.cancel()
  mover?.cancel()
  for (const run of runs)
    for (; run.held.length > 0; run.held.shift()) {
      const t = hostMs()
      run.handle.releaseSlots(1)
      log({ r: run.spec.id, s: -1 }, t)
    }
  flush()
  await client.close()
  flush()
}

await main()
// Sockets and timers are closed; exit now rather than wait for a lingering handle.
process.exit(0)
