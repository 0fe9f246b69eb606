import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterEach, describe, expect, it } from 'vitest'
import type { KeyedFamily, SluiceClient } from '../../client/index.js'
import type { RemoteAnswer } from '../../client/remote.js'
import type { ConfigInput } from '../../server/config/index.js'
import type { RunningCoordinator } from '../../server/index.js'
import { ManualClock } from '../../shared/index.js'
import { embeddedLedger } from '../helpers/embedded-ledger.js'

// A crowded family's checks are decided at the coordinator (remote decisions). While it
// restarts (SIGKILL, a deploy: 0.5 s down and its own start, docs/keys.md), a check asked meanwhile
// waits for the coordinator to be back (reconnectWaitMs, 1.5 s by default) and is decided by
// the one that comes back from its ledger (asked again, within that deadline, when it says),
// as a central limiter that never went down would have decided it; with reconnectWaitMs 0,
// refused at once, as before.

const closers: Array<() => Promise<unknown>> = []
afterEach(async () => {
  for (const c of closers.splice(0).reverse()) await c()
})

const clock = new ManualClock()
const config: ConfigInput = {
  server: { limits: { roundDebounceMs: 0 } },
  resources: [
    {
      match: 'api/*',
      keyed: true,
      kind: 'rate',
      capacity: 10,
      refreshMs: 100,
      leaseTtlMs: 1000,
      graceMs: 200,
      learningMs: 0,
      unsafeLearning: true,
      // One default holder: the other gateways hold nothing and ask the coordinator.
      maxDefaultHolders: 1,
    },
  ],
}

const ledger = embeddedLedger(clock, closers)
const { step } = ledger

/** A gateway, with `reconnectWaitMs` when given (the client's default without). */
const gateway = (url: string, id: string, reconnectWaitMs?: number): SluiceClient =>
  ledger.client(url, id, reconnectWaitMs === undefined ? {} : { reconnectWaitMs })

/** Lets what the last step queued settle (no I/O: nothing listens while the coordinator is down). */
const microtasks = async (): Promise<void> => {
  for (let i = 0; i < 5; i++) await Promise.resolve()
}

async function outage(reconnectWaitMs?: number): Promise<{
  answer: RemoteAnswer
  settledMs: number
  restartedMs: number
  later: () => Promise<boolean>
}> {
  const dataDir = mkdtempSync(join(tmpdir(), 'sluice-data-'))
  closers.push(async () => rmSync(dataDir, { recursive: true, force: true }))
  let server: RunningCoordinator = await ledger.start(config, dataDir)
  const port = server.port
  const clients = Array.from({ length: 4 }, (_, i) =>
    gateway(server.wsUrl, `g${i}`, reconnectWaitMs),
  )
  const families: KeyedFamily[] = clients.map((c) => c.keyed('api'))
  for (let i = 0; i < 20; i++) await step(server, clients, 50)
  const thin = families.find((f) => (f.lease?.capacity ?? 0) === 0)!
  const checked = async (key: string): Promise<boolean> => {
    const p = thin.check(key)
    let done = false
    void p.then(() => (done = true))
    for (let i = 0; i < 40 && !done; i++) await step(server, clients, 25)
    return p
  }
  // Decided there before the restart: the coordinator's part holds the family.
  expect(await checked('customer')).toBe(true)

  const gone = clients.map((c) => new Promise((resolve) => c.once('disconnect', resolve)))
  await server.close()
  await Promise.all(gone)
  const downAtMs = clock.now()
  const decided = thin.decide('other')
  expect(typeof decided).not.toBe('boolean')
  let answer: RemoteAnswer | undefined
  let settledAtMs = Number.NaN
  void (decided as Promise<RemoteAnswer>).then((a) => {
    answer = a
    settledAtMs = clock.now()
  })
  await microtasks()
  // Down 600 ms: nothing listens.
  for (let i = 0; i < 12 && answer === undefined; i++) {
    clock.advance(50)
    await microtasks()
  }
  const restartedMs = clock.now() - downAtMs
  server = await ledger.start(config, dataDir, port)
  for (let i = 0; i < 40 && answer === undefined; i++) await step(server, clients, 25)
  return {
    answer: answer!,
    settledMs: settledAtMs - downAtMs,
    restartedMs,
    later: async () => {
      for (let i = 0; i < 6; i++) await step(server, clients, 50)
      return checked('third')
    },
  }
}

describe('a remote check while the coordinator restarts', () => {
  it('waits for the coordinator to come back, and is admitted by the one that comes back as its buckets refill', async () => {
    const { answer, settledMs, restartedMs, later } = await outage()
    // Answered after the restart by the coordinator's part: refused at first (a part restarted
    // starts its buckets empty, as the dead part may have spent its burst just before it died),
    // asked again when it said (a token of 10/s: 100 ms), and admitted, as a central limiter
    // that never went down admits it. Not refused for want of a connection.
    expect(answer.admitted).toBe(true)
    expect(settledMs).toBeGreaterThanOrEqual(restartedMs + 100)
    expect(settledMs).toBeLessThan(1500)
    // And, its buckets filling at the key's rate, the restarted coordinator admits what comes next.
    expect(await later()).toBe(true)
  })

  it('is refused at once with reconnectWaitMs 0', async () => {
    const { answer, settledMs } = await outage(0)
    expect(answer).toEqual({ admitted: false, retryAfterMs: 0 })
    expect(settledMs).toBe(0)
  })
})
