import { afterEach, describe, expect, it } from 'vitest'
import { risingWaitMs } from '../../client/rise.js'
import type { Resource } from '../../client/index.js'
import type { LeaseMessage } from '../../shared/index.js'
import { Cluster } from '../helpers/cluster.js'
import { TestClient } from '../helpers/ws-client.js'
import { apikeyConfig, apikeyRefreshMs } from '../helpers/apikey-config.js'

// A lease of 0 that says `rising` (docs/protocol.md): a holder joining while the others hold
// the whole waits for its share, which comes as their falls are acknowledged. A real
// coordinator and real clients over WebSockets on a manual clock; one holder is a raw client
// whose acks the test sends, so the rise waits for the test.

const refreshMs = apikeyRefreshMs
const config = apikeyConfig

let cluster: Cluster | undefined
afterEach(async () => {
  await cluster?.close()
  cluster = undefined
})

/** Whether `p` has settled, after a few round trips with the coordinator (time standing still). */
async function settled(p: Promise<unknown>): Promise<boolean> {
  let done = false
  void p.then(
    () => (done = true),
    () => (done = true),
  )
  await cluster!.settle()
  return done
}

/**
 * Two real gateways and a raw one holding `resource` (a keyed family's share), the
 * raw one's leases acknowledged by `ackAll`; then what a third real one sees as it joins.
 */
async function holders(
  resource: string,
  family: Record<string, unknown> = {},
): Promise<{
  raw: TestClient
  ackAll: () => Promise<LeaseMessage[]>
  report: () => void
}> {
  cluster = new Cluster()
  await cluster.start(config(family))
  const raw = await TestClient.connect(`ws://127.0.0.1:${cluster.port}/v1/connect`)
  await raw.hello('raw')
  const report = (): void => raw.send({ type: 'demand', resources: [{ resource, wants: 10 }] })
  // Its share of the family, untouched: a fall for a joiner (`handOn`) gives up all that fell,
  // as a real client that never saw a key says in its ack.
  let share = 0
  const ackAll = async (): Promise<LeaseMessage[]> => {
    const leases: LeaseMessage[] = []
    for (let m = raw.received.shift(); m !== undefined; m = raw.received.shift())
      if (m.type === 'lease') {
        const held = []
        for (const l of m.leases) {
          if (l.resource !== resource) continue
          if (l.handOn === true) held.push({ resource, level: share - l.capacity, keys: [] })
          share = l.capacity
        }
        raw.send({ type: 'ack', seq: m.seq, ...(held.length > 0 ? { held } : {}) })
        leases.push(m)
      }
    await raw.flush()
    return leases
  }
  report()
  for (let i = 0; i < 2; i++) {
    ;(await cluster.client(`g${i}`)).keyed('apikey').tryAcquire('warm')
  }
  // Two seconds: every holder's buckets full (a refill time is a second), as a gateway serving
  // a while holds them.
  for (let i = 0; i < 40; i++) {
    report()
    await ackAll()
    await cluster.step(refreshMs / 2)
  }
  await ackAll()
  return { raw, ackAll, report }
}

describe('a lease of 0 that says its share is rising', () => {
  it("holds a joiner's ready() and first checks until its share comes: admitted, not refused while the others' falls are on their way", async () => {
    const { raw, ackAll } = await holders('apikey/*')
    const c = cluster!
    // A third real gateway joins: the three holders fall from a third to a quarter; the raw
    // one's fall waits unacknowledged, so the joiner's first share waits for it.
    const late = (await c.client('late')).keyed('apikey')
    const ready = late.ready()
    for (let i = 0; i < 3; i++) await c.step(10)
    const lease = late.lease
    expect(lease?.capacity).toBe(0)
    expect(lease?.rising).toBe(true)
    expect(await settled(ready)).toBe(false)
    // Checked meanwhile (as the HTTP edge does): waits for the share, not refused at once nor
    // asked of the coordinator's part, which holds nothing of a family that is not crowded.
    const checks = Promise.all(['new-0', 'new-1', 'new-2'].map((k) => late.check(k)))
    await c.step(10)
    expect(await settled(checks)).toBe(false)
    expect(late.remoteAsks).toBe(0)
    // The raw holder acknowledges its fall: the joiner's share comes whole.
    const falls = await ackAll()
    expect(falls.some((m) => m.leases.some((l) => l.capacity < 10 / 3))).toBe(true)
    await c.step(10)
    expect(await settled(ready)).toBe(true)
    expect(late.lease?.capacity).toBeCloseTo(0.25, 9)
    expect(late.lease?.rising).toBeUndefined()
    // A central limiter admits all three (three new keys, a burst of 10 each); the joiner's
    // share starts with what the falls made for it gave up.
    expect(await checks).toEqual([true, true, true])
    expect(late.remoteAsks).toBe(0)
    raw.ws.terminate()
  })

  it('waits risingWaitMs at most: a fall never acknowledged, ready() resolves and the checks are decided', async () => {
    const { raw, report } = await holders('apikey/*')
    const c = cluster!
    const late = (await c.client('late')).keyed('apikey')
    const ready = late.ready()
    for (let i = 0; i < 3; i++) await c.step(10)
    expect(late.lease?.rising).toBe(true)
    const check = late.check('new-0')
    const startMs = c.clock.now()
    let readyAtMs: number | undefined
    void ready.then(() => (readyAtMs = c.clock.now()))
    // The raw holder reports on, and never acknowledges its fall (a stalled process).
    while (readyAtMs === undefined && c.clock.now() - startMs < 3 * risingWaitMs) {
      report()
      await c.step(50)
    }
    expect(readyAtMs).toBeDefined()
    expect(readyAtMs! - startMs).toBeLessThanOrEqual(risingWaitMs + 50)
    // Decided by then, whatever came (a share in part past a second, or the lease of 0).
    expect(await settled(check)).toBe(true)
    raw.ws.terminate()
  })

  it('is said only to a holder the pool means to hold more: a lease of 0 meant as 0 resolves ready() at once', async () => {
    // Three default holders at most: a fourth is leased 0, meant as 0 (it gets a key's part
    // once the key goes hot here); its ready() resolves on that lease.
    const { raw } = await holders('apikey/*', { maxDefaultHolders: 3 })
    const c = cluster!
    const late = (await c.client('late')).keyed('apikey')
    const ready = late.ready()
    for (let i = 0; i < 3; i++) await c.step(10)
    expect(late.lease?.capacity).toBe(0)
    expect(late.lease?.rising).toBeUndefined()
    expect(await settled(ready)).toBe(true)
    raw.ws.terminate()
  })
})

describe('a named resource leased 0 while its share rises', () => {
  /**
   * A raw holder of `api` (100/s) that wants 30 and holds the whole (the surplus spread to
   * it), its leases acknowledged by `ackAll`; `surplus` as the resource's config says.
   */
  async function namedHolder(surplus: 'spread' | 'hold'): Promise<{
    raw: TestClient
    ackAll: () => Promise<LeaseMessage[]>
  }> {
    cluster = new Cluster()
    await cluster.start({
      server: { limits: { roundDebounceMs: 0 } },
      resources: [
        {
          match: 'api',
          kind: 'rate',
          capacity: 100,
          surplus,
          leaseTtlMs: 1000,
          refreshMs,
          graceMs: 200,
          learningMs: 0,
          unsafeLearning: true,
        },
      ],
    })
    const raw = await TestClient.connect(`ws://127.0.0.1:${cluster.port}/v1/connect`)
    await raw.hello('raw')
    const ackAll = async (): Promise<LeaseMessage[]> => {
      const leases: LeaseMessage[] = []
      for (let m = raw.received.shift(); m !== undefined; m = raw.received.shift())
        if (m.type === 'lease') {
          raw.send({ type: 'ack', seq: m.seq })
          leases.push(m)
        }
      await raw.flush()
      return leases
    }
    raw.send({ type: 'demand', resources: [{ resource: 'api', wants: 30 }] })
    for (let i = 0; i < 5; i++) {
      await ackAll()
      await cluster.step(refreshMs / 2)
    }
    await ackAll()
    return { raw, ackAll }
  }

  /** A real gateway joins: its resource, its `ready()`, and three short steps for its first lease. */
  async function joiner(): Promise<{ late: Resource; ready: Promise<void> }> {
    const late = (await cluster!.client('late')).resource('api')
    const ready = late.ready()
    for (let i = 0; i < 3; i++) await cluster!.step(10)
    return { late, ready }
  }

  const leasedTo = (leases: LeaseMessage[]): number[] =>
    leases.flatMap((m) => m.leases.filter((l) => l.resource === 'api').map((l) => l.capacity))

  it("holds a joining gateway's ready() until its share comes (the surplus spread to it), not resolved on the 0", async () => {
    const { raw, ackAll } = await namedHolder('spread')
    const c = cluster!
    const { late, ready } = await joiner()
    expect(late.lease?.capacity).toBe(0)
    expect(late.lease?.rising).toBe(true)
    expect(await settled(ready)).toBe(false)
    // The raw holder acknowledges its fall (the whole to 65: its 30 and half the surplus).
    const falls = leasedTo(await ackAll())
    expect(falls.some((capacity) => capacity < 100)).toBe(true)
    await c.step(10)
    expect(await settled(ready)).toBe(true)
    expect(late.lease?.capacity).toBeCloseTo(35, 6)
    expect(late.lease?.rising).toBeUndefined()
    raw.ws.terminate()
  })

  it('waits risingWaitMs at most for a fall never acknowledged', async () => {
    const { raw } = await namedHolder('spread')
    const c = cluster!
    const { late, ready } = await joiner()
    expect(late.lease?.rising).toBe(true)
    const startMs = c.clock.now()
    let readyAtMs: number | undefined
    void ready.then(() => (readyAtMs = c.clock.now()))
    while (readyAtMs === undefined && c.clock.now() - startMs < 3 * risingWaitMs) await c.step(50)
    expect(readyAtMs).toBeDefined()
    expect(readyAtMs! - startMs).toBeLessThanOrEqual(risingWaitMs + 50)
    raw.ws.terminate()
  })

  it('is not said where the pool means 0 for a holder that reported nothing (surplus: hold)', async () => {
    const { raw } = await namedHolder('hold')
    const { late, ready } = await joiner()
    expect(late.lease?.capacity).toBe(0)
    expect(late.lease?.rising).toBeUndefined()
    expect(await settled(ready)).toBe(true)
    raw.ws.terminate()
  })
})
