import { afterEach, describe, expect, it } from 'vitest'
import type { WebSocket, WebSocketServer } from 'ws'
import { createClient, type SluiceClient } from '../../client/index.js'
import { ManualClock, type DemandMessage, type LeaseGrant } from '../../shared/index.js'
import { scriptedCoordinator } from '../helpers/scripted-coordinator.js'

// A scripted coordinator (a lease must come late on purpose, which a real one does only by
// bad luck): it welcomes, records every demand report with the manual clock's time, and sends
// the quota leases the test writes. The real coordinator's side of `edge` is tested in
// test/client/keyed-quota.test.ts.
let server: WebSocketServer | undefined
let client: SluiceClient | undefined
afterEach(async () => {
  await client?.close()
  client = undefined
  await new Promise((resolve) => server?.close(resolve))
})

/** A quota lease of 10 units in window 5, `ttlMs` its life from receipt, `edge` as given. */
function quotaLease(ttlMs: number, edge?: [number, number]): LeaseGrant {
  return {
    resource: 'q',
    kind: 'quota',
    capacity: 10,
    burst: 10,
    ttlMs,
    refreshMs: 60_000,
    safeCapacity: 0,
    safeHoldMs: 0,
    window: {
      index: 5,
      endsInMs: ttlMs,
      quota: 10,
      lengthMs: 60_000,
      ...(edge === undefined ? {} : { edge }),
    },
  }
}

async function start(clock: ManualClock): Promise<{
  reports: { msg: DemandMessage; atMs: number }[]
  send: (grant: LeaseGrant, at?: number) => Promise<void>
}> {
  const reports: { msg: DemandMessage; atMs: number }[] = []
  let socket: WebSocket | undefined
  let seq = 0
  const scripted = await scriptedCoordinator((ws, msg) => {
    socket = ws
    if (msg.type === 'demand') reports.push({ msg: msg as DemandMessage, atMs: clock.now() })
  })
  server = scripted.server
  const { port } = scripted
  client = createClient({ url: `ws://127.0.0.1:${port}/v1/connect`, clientId: 'x', clock })
  client.resource('q')
  // Welcomed, it reports at once: that report is read before the ping that follows it.
  await new Promise<void>((resolve) => client!.once('connect', () => resolve()))
  await client.roundTrip()
  return {
    reports,
    send: async (grant, at) => {
      const stamp = at === undefined ? {} : { at }
      socket!.send(JSON.stringify({ type: 'lease', seq: ++seq, leases: [grant], ...stamp }))
      await client!.roundTrip()
    },
  }
}

describe('a quota window’s end on the client’s own clock (#41)', () => {
  it('spends a window until its end measured from a report, however late the lease comes, never past it', async () => {
    const clock = new ManualClock()
    const { reports, send } = await start(clock)
    const report = reports.at(-1)!
    expect(report.msg.n, 'reports are numbered').toBeGreaterThanOrEqual(1)
    const sentAtMs = report.atMs
    // The window ends 1,000 ms after the coordinator handled that report. The lease comes 600
    // ms after it was written (a stalled connection, a pause), saying 750 ms left: a life from
    // receipt would end 1,350 ms after the report, 350 ms into the next window.
    clock.advance(600)
    await send(quotaLease(750, [report.msg.n!, 1000]))
    const q = client!.resource('q')
    expect(q.tryAcquire()).toBe(true)
    clock.advanceTo(sentAtMs + 999)
    expect(q.tryAcquire(), 'spent until its measured end').toBe(true)
    clock.advanceTo(sentAtMs + 1000)
    expect(q.tryAcquire(), 'never past it').toBe(false)
  })

  it('keeps a lease’s own life when it names no report, or one this process does not know (an older coordinator, another process’s)', async () => {
    const clock = new ManualClock()
    const { reports, send } = await start(clock)
    const startMs = clock.now()
    await send(quotaLease(750))
    const q = client!.resource('q')
    clock.advanceTo(startMs + 749)
    expect(q.tryAcquire()).toBe(true)
    clock.advanceTo(startMs + 750)
    expect(q.tryAcquire()).toBe(false)
    // A report number never sent here: the lease's life from receipt, not the edge it names.
    const unknown = (reports.at(-1)!.msg.n ?? 0) + 1000
    const againMs = clock.now()
    await send({
      ...quotaLease(500, [unknown, 5_000]),
      window: { ...quotaLease(500).window!, index: 6 },
    })
    clock.advanceTo(againMs + 499)
    expect(q.tryAcquire()).toBe(true)
    clock.advanceTo(againMs + 500)
    expect(q.tryAcquire()).toBe(false)
  })
})

describe('a named quota’s next window sent ahead (#41)', () => {
  /** Window 5's lease of 10 units, its end `endsInMs` from receipt, with window 6's block of 4. */
  function withNext(endsInMs: number, next = { startsInMs: 760, endsInMs: 2_000 }): LeaseGrant {
    const lease = quotaLease(endsInMs)
    return {
      ...lease,
      window: { ...lease.window!, next: { index: 6, capacity: 4, ...next } },
    }
  }

  it('spends the next window’s block from its start, not before, without waiting for a lease of it', async () => {
    const clock = new ManualClock()
    const { send } = await start(clock)
    const startMs = clock.now()
    await send(withNext(750))
    const q = client!.resource('q')
    let got = 0
    while (q.tryAcquire()) got++
    expect(got, 'window 5’s budget').toBe(10)
    // Window 5 ends 750 ms from receipt; window 6 opens no sooner than 760 ms from it.
    clock.advanceTo(startMs + 755)
    expect(q.tryAcquire(), 'between the end and the start').toBe(false)
    expect(q.mode, 'still leased: the lease lasts to the next window’s end').toBe('leased')
    clock.advanceTo(startMs + 760)
    got = 0
    while (q.tryAcquire()) got++
    expect(got, 'window 6’s block, nothing used yet').toBe(4)
    expect(q.usedInWindow()).toEqual({ used: 4, window: 6 })
    // The lease of window 6 as sent ahead is the resource's once it opens (its timer on the clock).
    expect(q.lease?.window?.index).toBe(6)
    expect(q.lease?.capacity).toBe(4)
    // Spent until the next window's end, never past it.
    clock.advanceTo(startMs + 2_000)
    expect(q.usedInWindow()).toEqual({ used: 4, window: 6 })
  })

  it('keeps the block when a lease of the window before comes late, and gives way to a lease of its own window', async () => {
    const clock = new ManualClock()
    const { send } = await start(clock)
    const startMs = clock.now()
    await send(withNext(750))
    const q = client!.resource('q')
    clock.advanceTo(startMs + 800)
    expect(q.tryAcquire()).toBe(true)
    // A lease of window 5 made before its end, come now: nothing new (3 of window 6's 4 left).
    await send(withNext(0, { startsInMs: 0, endsInMs: 1_200 }))
    expect(q.usedInWindow()).toEqual({ used: 1, window: 6 })
    // The resource keeps its lease of window 6 too (what it spends is counted in 6, and `lease`
    // says so: the fault workers count each admission by it).
    expect(q.lease?.window?.index).toBe(6)
    expect(q.lease?.capacity).toBe(4)
    let got = 0
    while (q.tryAcquire()) got++
    expect(got).toBe(3)
    // Window 6's own lease (its round): its budget rules, with what was used of it.
    await send({
      ...quotaLease(1_000),
      capacity: 7,
      window: { ...quotaLease(1_000).window!, index: 6 },
    })
    got = 0
    while (q.tryAcquire()) got++
    expect(got).toBe(3)
    expect(q.usedInWindow()).toEqual({ used: 7, window: 6 })
  })

  /**
   * Two stamped batches: window 5's lease sent at 10,000 ms on the coordinator's clock and
   * handled at once (at `t0`, its budget spent), then 500 ms later one sent at `secondAt`
   * carrying window 6 from 100 ms after its sending.
   */
  async function twoBatches(secondAt: number): Promise<{ clock: ManualClock; t0: number }> {
    const clock = new ManualClock()
    const { send } = await start(clock)
    const q = client!.resource('q')
    const t0 = clock.now()
    await send(quotaLease(5_000), 10_000)
    while (q.tryAcquire());
    clock.advanceTo(t0 + 500)
    await send(withNext(50, { startsInMs: 100, endsInMs: 2_000 }), secondAt)
    return { clock, t0 }
  }

  it('opens the next window from the quickest of the connection’s stamped batches, not only its own', async () => {
    // The second sent at 10,480 (20 ms on its way: a busy loop): window 6 opens at 10,580 on the
    // coordinator's clock. Placed from itself it opens 600 ms after t0; from the first batch,
    // 581 ms after it and the drift over them (0.1% of 581) at most: no sooner than the window
    // opens, whichever batch was slowed.
    const { clock, t0 } = await twoBatches(10_480)
    const q = client!.resource('q')
    clock.advanceTo(t0 + 581)
    expect(q.tryAcquire(), 'before the start as the quicker batch places it').toBe(false)
    clock.advanceTo(t0 + 582)
    expect(q.tryAcquire(), 'window 6 open 18 ms sooner than its own batch places it').toBe(true)
    expect(q.usedInWindow()).toEqual({ used: 1, window: 6 })
  })

  it('places a next window from its own batch alone when the others are slower', async () => {
    // The first batch took 30 ms longer than the second: the second's own placement stands.
    const { clock, t0 } = await twoBatches(10_530)
    const q = client!.resource('q')
    clock.advanceTo(t0 + 599)
    expect(q.tryAcquire()).toBe(false)
    clock.advanceTo(t0 + 600)
    expect(q.tryAcquire()).toBe(true)
  })
})
