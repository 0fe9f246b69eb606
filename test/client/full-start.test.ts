import { afterEach, describe, expect, it } from 'vitest'
import type { ConfigInput } from '../../server/config/index.js'
import { Cluster } from '../helpers/cluster.js'

// A rate lease's bucket starts empty and earns at the lease's rate (docs/client.md), except
// when the coordinator says it may start full: nobody could enforce any of the resource for
// the burst's refill time before it (docs/allocation.md, "A bucket that starts full").

const cleanup: (() => Promise<void>)[] = []
afterEach(async () => {
  for (const f of cleanup.splice(0).reverse()) await f()
})

const config = (extra: Record<string, unknown> = {}): ConfigInput => ({
  server: { limits: { roundDebounceMs: 0 } },
  resources: [
    {
      match: 'api',
      kind: 'rate',
      capacity: 1000,
      burst: 1000,
      leaseTtlMs: 2000,
      refreshMs: 200,
      graceMs: 200,
      safeHoldMs: 500,
      learningMs: 0,
      unsafeLearning: true,
      ...extra,
    },
    {
      match: 'ip/*',
      keyed: true,
      kind: 'rate',
      capacity: 10,
      burst: 10,
      leaseTtlMs: 2000,
      refreshMs: 200,
      graceMs: 200,
      safeHoldMs: 500,
      learningMs: 0,
      unsafeLearning: true,
    },
  ],
})

async function cluster(): Promise<Cluster> {
  const c = new Cluster()
  cleanup.push(() => c.close())
  await c.start(config())
  return c
}

/** tryAcquire calls admitted of `n` made at one instant. */
function burstOf(resource: { tryAcquire(): boolean }, n: number): number {
  let admitted = 0
  for (let i = 0; i < n; i++) if (resource.tryAcquire()) admitted++
  return admitted
}

describe('a first lease on a quiet resource starts full', () => {
  it('admits the first requests at once after ready() when nobody held the resource', async () => {
    const c = await cluster()
    await c.step(1000) // the coordinator has known every lease (none) for the burst's refill time
    const client = await c.client('first')
    const api = client.resource('api', { wants: 1000 })
    let ready = false
    void api.ready().then(() => (ready = true))
    // Time moves until the lease comes, not after: what the bucket holds is what it started with.
    for (let i = 0; i < 50 && !ready; i++) await c.step(10)
    expect(ready).toBe(true)
    expect(api.lease?.full).toBe(true)
    // The case: a 1000/s lease, five requests the instant ready() resolves.
    expect(burstOf(api, 5)).toBe(5)
    expect(burstOf(api, 2000)).toBe(995) // the whole burst, never more
  })

  it('starts empty when the coordinator has not known the resource for that long', async () => {
    const c = await cluster()
    const client = await c.client('early')
    const api = client.resource('api', { wants: 1000 })
    for (let i = 0; i < 50 && api.lease === undefined; i++) await c.step(10)
    expect(api.lease?.capacity).toBe(1000)
    expect(api.lease?.full).toBeUndefined()
    expect(burstOf(api, 5)).toBe(0)
  })

  it('starts empty while another process holds it, or did within the refill time', async () => {
    const c = await cluster()
    await c.step(1000)
    const a = await c.client('a')
    const apiA = a.resource('api', { wants: 1000 })
    for (let i = 0; i < 50 && apiA.lease === undefined; i++) await c.step(10)
    expect(apiA.lease?.full).toBe(true)
    expect(burstOf(apiA, 1000)).toBe(1000) // a spends the whole burst
    const b = await c.client('b')
    const apiB = b.resource('api', { wants: 1000 })
    for (let i = 0; i < 50 && apiB.lease === undefined; i++) await c.step(10)
    expect(apiB.lease?.full).toBeUndefined()
    expect(burstOf(apiB, 5)).toBe(0)
    // Both go; the resource is quiet again once their leases (and fallbacks) are over and a
    // refill time has passed: 2 s lease + 0.2 s grace + 0.5 s safe hold + 1 s.
    await a.close()
    await b.close()
    const c2 = await c.client('c')
    const apiC = c2.resource('api', { wants: 1000 })
    for (let i = 0; i < 50 && apiC.lease === undefined; i++) await c.step(10)
    expect(apiC.lease?.full).toBeUndefined()
    apiC.release()
    await c2.close()
    await c.step(3800)
    const d = await c.client('d')
    const apiD = d.resource('api', { wants: 1000 })
    for (let i = 0; i < 50 && apiD.lease === undefined; i++) await c.step(10)
    expect(apiD.lease?.full).toBe(true)
    expect(burstOf(apiD, 5)).toBe(5)
  })

  it("a replacement starts full once the one it replaces gave the resource up and a refill time passed, not its lease's life", async () => {
    const c = await cluster()
    await c.step(1000)
    const a = await c.client('a')
    const apiA = a.resource('api', { wants: 1000 })
    for (let i = 0; i < 50 && apiA.lease === undefined; i++) await c.step(10)
    expect(apiA.lease?.full).toBe(true)
    expect(burstOf(apiA, 1000)).toBe(1000)
    // a gives the resource up (release, then close). Its lease would have counted for its life,
    // its grace and its safe hold (2.7 s here) before any bucket could start full again; what
    // its bucket held is all that may still be spent, and that is gone within a refill time.
    apiA.release()
    await a.close()
    await c.step(1100)
    const d = await c.client('d')
    const apiD = d.resource('api', { wants: 1000 })
    for (let i = 0; i < 50 && apiD.lease === undefined; i++) await c.step(10)
    expect(apiD.lease?.full).toBe(true)
    expect(burstOf(apiD, 2000)).toBe(1000) // the whole burst, never more
  })

  it("a keyed family's first shares: the first starts every key full, and gives the next what its fall left", async () => {
    const c = await cluster()
    await c.step(1000)
    const a = (await c.client('gw-a')).keyed('ip')
    for (let i = 0; i < 50 && a.mode !== 'leased'; i++) await c.step(10)
    // Nobody held any key of ip/* for a burst's refill (1 s) before: a, alone, is leased the
    // whole and starts every key full (server/pool/lease-out.ts, firstShareFill).
    expect(a.lease?.capacity).toBe(1)
    expect(a.lease?.full).toBe(true)
    expect(burstOf({ tryAcquire: () => a.tryAcquire('10.0.0.1') }, 12)).toBe(10)
    expect(burstOf({ tryAcquire: () => a.tryAcquire('10.0.0.2') }, 2)).toBe(2)
    // A second process joins: a falls to half, told a joiner waits (`handOn`). Its fall gives
    // up what the half that fell held, and says it in its ack: of a key never seen, half the
    // burst; of 10.0.0.2 (8 held), half, 4 (it gave only what did not fit its new burst, 3,
    // before: a key below it gave nothing); of 10.0.0.1, spent, about nothing. b's first
    // share starts from that (server/pool/fall-gifts.ts). Before, a dropped it all and b
    // started every key with half of what nobody held: a quarter of the burst at first, and
    // nothing once every share had been out a refill time.
    const b = (await c.client('gw-b')).keyed('ip')
    for (let i = 0; i < 50 && !((b.lease?.capacity ?? 0) > 0.4); i++) await c.step(10)
    expect(b.lease?.capacity).toBeCloseTo(0.5, 9)
    // Less what went at a's excess's pace (half the rate) from when a's fall was sent: a 10 ms
    // step or two took a hundredth or two of the burst. b's rise is the one a's fall was made
    // for (paired): the tokens come as tokens of b's share, not an excess going.
    expect(b.lease?.handed?.level).toBeGreaterThan(0.48)
    expect(b.lease?.handed?.level).toBeLessThanOrEqual(0.5)
    expect(b.lease?.handed?.goesAtShare).toBeUndefined()
    const at = (f: typeof a, key: string): number =>
      burstOf({ tryAcquire: () => f.tryAcquire(key) }, 12)
    const b3 = at(b, '10.0.0.3')
    const b2 = at(b, '10.0.0.2')
    const b1 = at(b, '10.0.0.1')
    // Less what went since a's fall was sent at a's excess's pace: 4.95 of a key never seen, a
    // little over 4 of 10.0.0.2 (it earned while b joined).
    expect(b3).toBe(4)
    expect(b2).toBe(4)
    expect(b1).toBeLessThanOrEqual(1)
    // a keeps its half of each: never, with b's, more than the burst and what both earned
    // since (a few 10 ms steps at 10/s).
    const a3 = at(a, '10.0.0.3')
    const a2 = at(a, '10.0.0.2')
    const a1 = at(a, '10.0.0.1')
    expect(a3).toBe(5)
    // Half of 10.0.0.2's 8 stayed at a (it kept all 5 that fit its new burst before).
    expect(a2).toBe(4)
    expect(a3 + b3).toBeLessThanOrEqual(10)
    expect(a2 + b2).toBeLessThanOrEqual(8 + 1)
    expect(a1 + b1).toBeLessThanOrEqual(1)
    // A third joins: both fall to a third, each giving a sixth of a key never seen (b's keys
    // never seen started from a's gift). The third waits for both acks and starts from both:
    // about a third of the burst, as the others hold.
    const third = (await c.client('gw-c')).keyed('ip')
    for (let i = 0; i < 50 && !((third.lease?.capacity ?? 0) > 0.3); i++) await c.step(10)
    expect(third.lease?.capacity).toBeCloseTo(1 / 3, 9)
    const fresh = [at(a, '10.0.0.4'), at(b, '10.0.0.4'), at(third, '10.0.0.4')]
    expect(fresh).toEqual([3, 3, 3])
    // What a and b spent of 10.0.0.3 they did not give: the third gets nothing of it.
    expect(at(third, '10.0.0.3')).toBe(0)
  })

  it('a second holder of a named rate starts with what the first gave up as it fell to half', async () => {
    const c = await cluster()
    await c.step(1000)
    const apiA = (await c.client('gw-a')).resource('api', { wants: 1000 })
    for (let i = 0; i < 50 && apiA.lease === undefined; i++) await c.step(10)
    expect(apiA.lease?.full).toBe(true)
    // b asks as much: a falls to half, its bucket gives up the 500 its other half held, says so
    // in its ack, and b's rise, granted as that ack is handled, holds them (lease-out.ts,
    // `fill`). Before, a dropped them and b started from nothing.
    const apiB = (await c.client('gw-b')).resource('api', { wants: 1000 })
    for (let i = 0; i < 100 && !((apiB.lease?.capacity ?? 0) > 0); i++) await c.step(10)
    expect(apiA.lease?.capacity).toBe(500)
    expect(apiB.lease?.capacity).toBe(500)
    expect(apiB.lease?.fill).toBeCloseTo(500, 0)
    const atB = burstOf(apiB, 2000)
    const atA = burstOf(apiA, 2000)
    expect(atB).toBeGreaterThanOrEqual(500)
    // Never more than one burst and what the two earned since (10 ms steps at 1000/s).
    expect(atA + atB).toBeLessThanOrEqual(1000 + 20)
  })
})
