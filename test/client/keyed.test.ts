import { afterEach, describe, expect, it } from 'vitest'
import { resolveKeyedOptions } from '../../client/options.js'
import { KeyedFamily } from '../../client/index.js'
import { ManualClock, domainLimits, type LeaseGrant } from '../../shared/index.js'
import type { ConfigInput } from '../../server/config/index.js'
import { Cluster } from '../helpers/cluster.js'
import { apikeyConfig, apikeyRefreshMs } from '../helpers/apikey-config.js'

// Keyed families end to end: a real coordinator and real clients over WebSockets on a manual
// clock. Every key of apikey/* is a limit of 10/s of its own, shared by the processes using it.

const refreshMs = apikeyRefreshMs
const config = apikeyConfig

let cluster: Cluster | undefined
afterEach(async () => {
  await cluster?.close()
  cluster = undefined
})

/** Three processes holding the family, each with its default share once leased. */
async function three(extra: Record<string, unknown> = {}): Promise<KeyedFamily[]> {
  cluster = new Cluster()
  await cluster.start(config(extra))
  const families = await Promise.all(
    ['a', 'b', 'c'].map(async (id) => (await cluster!.client(id)).keyed('apikey')),
  )
  // The first lease may come at 0 (a holder waits for the others to make room): step until the
  // default is split three ways.
  for (let i = 0; i < 30 && families.some((f) => !((f.lease?.capacity ?? 0) > 0.33)); i++)
    await cluster.step(refreshMs / 2)
  return families
}

/** Σ over processes of what each may use of `key` now: never above the key's capacity. */
function enforced(families: readonly KeyedFamily[], key: string): number {
  return families.reduce((sum, f) => sum + f.leaseOf(key).capacity, 0)
}

describe('keyed families (real sockets, manual clock)', () => {
  it('refuses a key asked for as a resource of its own at once, and says to use client.keyed', async () => {
    cluster = new Cluster()
    await cluster.start(config())
    const client = await cluster.client('lost')
    const errors: string[] = []
    client.on('error', (e) => errors.push(e.code))
    // What a user migrating from a per-key Redis limiter writes first (#42.7): it used to wait for
    // a lease that never came, and time out after 5 s saying the coordinator was unreachable.
    const r = client.resource('apikey/customer-42')
    const ready = r.ready().then(
      () => undefined,
      (e: unknown) => e as { code: string; message: string },
    )
    await cluster.step(refreshMs)
    const refused = await ready
    expect(refused?.code).toBe('SLUICE_ERR_RESOURCE_KEYED')
    expect(refused?.message).toContain(`client.keyed('apikey')`)
    expect(r.tryAcquire()).toBe(false)
    // The family's own id is a template, never a resource.
    expect(() => client.resource('apikey/*')).toThrow(/client\.keyed\('apikey'\)/)
    // The same client's keyed family is served as ever.
    const f = client.keyed('apikey')
    for (let i = 0; i < 10 && (f.lease?.capacity ?? 0) === 0; i++) await cluster.step(refreshMs)
    expect(f.lease?.capacity).toBe(1)
    await cluster.step(1000)
    expect(f.tryAcquire('customer-42')).toBe(true)
  })

  it('gives every holder a default share, so a new key’s first request is decided at once', async () => {
    const families = await three()
    for (const f of families) expect(f.lease?.capacity).toBeCloseTo(1 / 3, 9)
    // A share that has just risen brings no burst with it (it is earned: the process it came
    // from may have spent it); one second on, a new key's bucket starts full.
    const fresh = families[0]!.leaseOf('fresh')
    expect(fresh.source).toBe('default')
    await cluster!.step(1000)
    // A key never seen anywhere: admitted here and now, from the default share's burst.
    for (const [i, f] of families.entries()) expect(f.tryAcquire(`new-${i}`)).toBe(true)
    const lease = families[0]!.leaseOf('anything')
    expect(lease.source).toBe('default')
    expect(lease.capacity).toBeCloseTo(10 / 3, 9)
    expect(lease.burst).toBeCloseTo(10 / 3, 9)
    expect(enforced(families, 'anything')).toBeCloseTo(10, 9)
  })

  it('moves a hot key to the process that uses it, never above the key’s capacity on the way', async () => {
    const families = await three()
    const [a] = families
    let admitted = 0
    for (let t = 0; t < 3000; t += 10) {
      // a asks for key k1 at 100/s: far above its default 3.3/s.
      if (a!.tryAcquire('k1')) admitted++
      await cluster!.step(10)
      expect(enforced(families, 'k1'), `at ${t} ms`).toBeLessThanOrEqual(10 + 1e-9)
    }
    // a holds k1 on its own now, nearly all of it; b and c hold k1 at (near) 0.
    expect(a!.leaseOf('k1').source).toBe('key')
    expect(a!.leaseOf('k1').capacity).toBeGreaterThan(9)
    // b and c were leased k1 at 0 (and let it lapse): never their default share for it again.
    for (const f of families.slice(1)) {
      expect(f.leaseOf('k1').source).not.toBe('default')
      expect(f.leaseOf('k1').capacity).toBe(0)
    }
    // Other keys keep their default shares everywhere.
    expect(enforced(families, 'k2')).toBeCloseTo(10, 9)
    expect(cluster!.server.coordinator.view.families()[0]).toMatchObject({
      id: 'apikey/*',
      holders: 3,
      hotKeys: 1,
    })
    expect(admitted).toBeGreaterThan(5)
    // Seen: the family's own route and Prometheus, a series per family, none per key.
    const http = cluster!.server.http
    const listed = (await http.inject('/v1/families')).json().families
    expect(listed[0].keys[0]).toMatchObject({ key: 'k1', capacity: 10 })
    const metrics = (await http.inject('/metrics')).body
    expect(metrics).toMatch(/^sluice_family_hot_keys\{family="apikey\/\*"\} 1$/m)
    expect(metrics).toMatch(/^sluice_family_holders\{family="apikey\/\*"\} 3$/m)
    expect(metrics).not.toMatch(/k1/)
  })

  it('leaves a key asked past its share’s rate on the default share while its bucket holds the asking', async () => {
    // 10/s with a burst of 300 ("600 a minute" in one go): each share holds 100 of every key.
    const families = await three({ burst: 300 })
    const [a] = families
    for (let t = 0; t < 30_000; t += 500) await cluster!.step(500) // bursts earned since the rise
    const hotKeys = () => cluster!.server.coordinator.view.families()[0]!.hotKeys
    // 20/s at a, six times its share's 3.3/s, for 2 s: the bucket holds it. A lease of its own
    // would start from what the bucket holds, with nothing gained.
    let admitted = 0
    for (let t = 0; t < 2000; t += 50) {
      if (a!.tryAcquire('burst')) admitted++
      await cluster!.step(50)
    }
    expect(admitted).toBe(40)
    expect(a!.leaseOf('burst').source).toBe('default')
    expect(hotKeys()).toBe(0)
    // Asked on at that rate, the bucket nears empty (within 3 refresh periods): leased on its own.
    for (let t = 0; t < 6000 && a!.leaseOf('burst').source === 'default'; t += 50) {
      a!.tryAcquire('burst')
      await cluster!.step(50)
    }
    expect(a!.leaseOf('burst').source).toBe('key')
    expect(hotKeys()).toBe(1)
  })

  it('re-splits the default when a holder joins, through decreases acknowledged first', async () => {
    const families = await three()
    const d = (await cluster!.client('d')).keyed('apikey')
    const all = [...families, d]
    for (let t = 0; t < 1000; t += 10) {
      await cluster!.step(10)
      expect(enforced(all, 'x'), `at ${t} ms`).toBeLessThanOrEqual(10 + 1e-9)
    }
    for (const f of all) expect(f.lease?.capacity).toBeCloseTo(1 / 4, 9)
  })

  it('hands a share closed cleanly to its replacement with what it held: new keys start from it, spent keys stay spent', async () => {
    const families = await three()
    for (let i = 0; i < 20; i++) await cluster!.step(refreshMs)
    const [a, b, c] = families as [KeyedFamily, KeyedFamily, KeyedFamily]
    // A spends all it holds of `spent`, and one token of `some`; then closes (a SIGTERM).
    let spentAtA = 0
    while (a.tryAcquire('spent')) spentAtA++
    expect(spentAtA).toBe(3)
    expect(a.tryAcquire('some')).toBe(true)
    await cluster!.clients[0]!.close()
    // A closed admits nothing more, though its buckets held some: that is the heir's now.
    expect(a.tryAcquire('fresh')).toBe(false)
    expect(a.leaseOf('fresh').source).toBe('none')
    // B and C keep their shares while the share waits for its heir.
    await cluster!.step(10)
    expect(b.lease?.capacity).toBeCloseTo(1 / 3, 9)
    const d = (await cluster!.client('d')).keyed('apikey')
    for (let i = 0; i < 30 && !((d.lease?.capacity ?? 0) > 0.33); i++) await cluster!.step(10)
    expect(d.lease?.capacity).toBeCloseTo(1 / 3, 9)
    expect(c.lease?.capacity).toBeCloseTo(1 / 3, 9)
    // D starts every key from what A held, at once: a key nobody spent is full of the share
    // (without the handover it started empty here: nothing of the burst was free).
    let fresh = 0
    while (d.tryAcquire('fresh')) fresh++
    expect(fresh).toBe(3)
    let some = 0
    while (d.tryAcquire('some')) some++
    expect(some).toBe(2)
    // And what A spent stays spent: the three never hold more of a key than one bucket.
    expect(d.tryAcquire('spent')).toBe(false)
    let others = 0
    while (b.tryAcquire('spent') || c.tryAcquire('spent')) others++
    expect(spentAtA + others).toBeLessThanOrEqual(10)
  })

  it('hands a hot key’s share closed cleanly to the replacement with the family’s: the others keep theirs', async () => {
    const families = await three()
    const [a, b, c] = families as [KeyedFamily, KeyedFamily, KeyedFamily]
    // `hot` asked for at every process, more than it allows: leased on its own, a third each.
    for (let t = 0; t < 3000; t += 10) {
      for (const f of families) f.tryAcquire('hot')
      await cluster!.step(10)
    }
    for (const f of families) expect(f.leaseOf('hot').source).toBe('key')
    for (const f of families) expect(f.leaseOf('hot').capacity).toBeCloseTo(10 / 3, 6)
    await cluster!.clients[0]!.close()
    const d = (await cluster!.client('d')).keyed('apikey')
    const all = [b, c, d]
    let atOnce: number | undefined
    for (let t = 0; t < 1500; t += 10) {
      for (const f of all) f.tryAcquire('hot')
      await cluster!.step(10)
      expect(enforced([a, ...all], 'hot'), `at ${t} ms`).toBeLessThanOrEqual(10 + 1e-9)
      // The first lease the replacement enforces for the key.
      if (atOnce === undefined && d.leaseOf('hot').source === 'key')
        atOnce = d.leaseOf('hot').capacity
      // B and C never rise to A's share and fall back: they keep theirs throughout.
      expect(b.leaseOf('hot').capacity, `at ${t} ms`).toBeLessThanOrEqual(10 / 3 + 1e-6)
      expect(c.leaseOf('hot').capacity, `at ${t} ms`).toBeLessThanOrEqual(10 / 3 + 1e-6)
    }
    // D's first lease of the key is A's share (without the handover: 0, while B and C rose).
    expect(atOnce).toBeCloseTo(10 / 3, 6)
    for (const f of all) expect(f.leaseOf('hot').capacity).toBeCloseTo(10 / 3, 6)
  })

  it('starts the replacement’s share of a hot key with what it earned since the release', async () => {
    // Refresh periods of 1 s: a vacancy waits up to one for its heir.
    const families = await three({ refreshMs: 1000, leaseTtlMs: 5000 })
    const [a, b, c] = families as [KeyedFamily, KeyedFamily, KeyedFamily]
    for (let t = 0; t < 8000; t += 10) {
      for (const f of families) f.tryAcquire('hot')
      await cluster!.step(10)
    }
    for (const f of families) expect(f.leaseOf('hot').capacity).toBeCloseTo(10 / 3, 6)
    await cluster!.clients[0]!.close()
    // 700 ms pass before the replacement comes (its process starting), B and C using theirs.
    for (let t = 0; t < 700; t += 10) {
      b.tryAcquire('hot')
      c.tryAcquire('hot')
      await cluster!.step(10)
    }
    const d = (await cluster!.client('d')).keyed('apikey')
    for (let t = 0; t < 1000 && d.leaseOf('hot').source !== 'key'; t += 10) {
      b.tryAcquire('hot')
      c.tryAcquire('hot')
      await cluster!.step(10)
      expect(enforced([a, b, c, d], 'hot')).toBeLessThanOrEqual(10 + 1e-9)
    }
    expect(d.leaseOf('hot').capacity).toBeCloseTo(10 / 3, 6)
    // A's share earned 10/3 per second for the 0.7 s and more it waited (2.3 tokens; at most
    // its burst of 3.3): D admits 2 of them at once. Without: its part started empty, 0.
    let admitted = 0
    while (d.tryAcquire('hot')) admitted++
    expect(admitted).toBeGreaterThanOrEqual(2)
    expect(admitted).toBeLessThanOrEqual(3)
  })

  it('sends a newcomer the hot keys with its first family lease: it never enforces a default for them', async () => {
    const families = await three()
    const [a] = families
    for (let t = 0; t < 2000; t += 10) {
      a!.tryAcquire('hot')
      a!.tryAcquire('hot')
      await cluster!.step(10)
    }
    expect(a!.leaseOf('hot').source).toBe('key')
    const d = (await cluster!.client('d')).keyed('apikey')
    const all = [...families, d]
    for (let t = 0; t < 1000; t += 10) {
      a!.tryAcquire('hot')
      await cluster!.step(10)
      expect(enforced(all, 'hot'), `at ${t} ms`).toBeLessThanOrEqual(10 + 1e-9)
    }
    expect(d.lease).toBeDefined()
    expect(d.leaseOf('hot').source).not.toBe('default')
  })

  it('follows a plan: a key of its own capacity', async () => {
    const families = await three({ keys: { gold: { capacity: 30 } } })
    expect(families[0]!.limitOf('gold')).toEqual({ capacity: 30, burst: 30 })
    expect(enforced(families, 'gold')).toBeCloseTo(30, 9)
  })
})

describe('a process with more hot keys than one message carries (real sockets, manual clock)', () => {
  it('reports them in several messages, and reconnects with a hello within the bound', async () => {
    const maxEntries = domainLimits.maxEntries
    const hot = maxEntries + 2000
    cluster = new Cluster()
    const bigConfig: ConfigInput = {
      server: {
        limits: {
          roundDebounceMs: 0,
          maxEntriesPerSec: 1_000_000,
          maxFrameBytes: 16 * 2 ** 20,
          // A restart sends this process a lease (or a cut to 0) of every key at once: MBs.
          maxSendBufferBytes: 64 * 2 ** 20,
          maxResources: 100_000,
        },
      },
      resources: [
        {
          match: 'apikey/*',
          keyed: true,
          kind: 'rate',
          capacity: 1,
          refreshMs,
          leaseTtlMs: 1000,
          graceMs: 200,
          learningMs: 0,
          unsafeLearning: true,
          maxHotKeys: 2 * hot,
        },
      ],
    }
    await cluster.start(bigConfig)
    // Frames as large as the coordinator takes here: the split is by entries (a split by bytes
    // is the next test's).
    const client = await cluster.client('a', { maxFrameBytes: 16 * 2 ** 20 })
    const errors: string[] = []
    client.on('error', (e) => errors.push(e.code))
    const f = client.keyed('apikey', { maxKeys: 2 * hot, maxKeysPerReport: maxEntries })
    for (let i = 0; i < 30 && !((f.lease?.capacity ?? 0) > 0.99); i++) await cluster.step(refreshMs)
    await cluster.step(2000) // every new key's bucket starts full (1 token)
    // Each key asked for twice: the second is refused, so every key asks to be leased alone.
    for (let i = 0; i < hot; i++) for (let j = 0; j < 2; j++) f.tryAcquire(`k${i}`)
    const hotKeys = (): number => cluster!.server.coordinator.view.families(0)[0]?.hotKeys ?? 0
    // A report of the family and maxEntries candidates is maxEntries + 1 entries: two messages.
    await cluster.step(refreshMs)
    expect(hotKeys()).toBe(maxEntries)
    for (let i = 0; i < hot; i++) for (let j = 0; j < 2; j++) f.tryAcquire(`k${i}`)
    await cluster.step(refreshMs)
    expect(hotKeys()).toBe(hot)
    expect(errors).toEqual([])
    expect(client.connected).toBe(true)
    // A new coordinator on the same port: the hello claims what one message carries.
    const port = cluster.port
    await cluster.stop()
    await cluster.start(bigConfig, port)
    await cluster.reconnected()
    await cluster.step(refreshMs)
    expect(errors).toEqual([])
    expect(client.connected).toBe(true)
    expect(f.lease?.capacity).toBeGreaterThan(0.99)
  }, 60_000)
})

describe('a keyed concurrency family (real sockets, manual clock)', () => {
  it('holds every key to its slots in flight across processes, waiters in FIFO order, and moves a busy key’s slots to who asks', async () => {
    cluster = new Cluster()
    await cluster.start({
      server: { limits: { roundDebounceMs: 0 } },
      resources: [
        {
          match: 'db/*',
          keyed: true,
          kind: 'concurrency',
          capacity: 4,
          leaseTtlMs: 1000,
          refreshMs,
          graceMs: 200,
          learningMs: 0,
          unsafeLearning: true,
        },
      ],
    })
    const families = await Promise.all(
      ['a', 'b'].map(async (id) => (await cluster!.client(id)).keyed('db')),
    )
    for (let i = 0; i < 30 && families.some((f) => !((f.lease?.capacity ?? 0) > 0.49)); i++)
      await cluster.step(refreshMs / 2)
    const [a, b] = families as [KeyedFamily, KeyedFamily]
    // Each holds half of every key's 4 slots by default: 2 in flight at once, whole slots.
    expect(a.leaseOf('tenant-1')).toMatchObject({ capacity: 2, source: 'default' })
    const inFlight = (key: string): number =>
      families.reduce(
        (sum, f) => sum + (f.limitOf(key).capacity - f.remaining(key) >= 0 ? 0 : 0),
        0,
      )
    void inFlight
    const permits = [await a.acquire('tenant-1'), await a.acquire('tenant-1')]
    expect(a.tryAcquire('tenant-1')).toBe(false)
    // Waiters queue in order; a release serves the first.
    const order: number[] = []
    const w1 = a.acquire('tenant-1', 1, { maxWaitMs: 60_000 }).then((p) => (order.push(1), p))
    const w2 = a.acquire('tenant-1', 1, { maxWaitMs: 60_000 }).then((p) => (order.push(2), p))
    permits[0]!.release()
    const p1 = await w1
    expect(order).toEqual([1])
    // a is busy with the key: reported past its default share, the key is leased on its own and
    // b's idle half moves to a, through the safe path; never more than 4 in flight in all.
    for (let i = 0; i < 30 && order.length < 2; i++) {
      await cluster.step(refreshMs)
      const leased = a.leaseOf('tenant-1').capacity + b.leaseOf('tenant-1').capacity
      expect(leased).toBeLessThanOrEqual(4)
    }
    const p2 = await w2
    expect(order).toEqual([1, 2])
    expect(a.leaseOf('tenant-1').source).toBe('key')
    expect(a.leaseOf('tenant-1').capacity).toBeGreaterThanOrEqual(3)
    expect(b.tryAcquire('tenant-1')).toBe(false)
    for (const p of [permits[1]!, p1, p2]) p.release()
    // A wait is bounded on the client's clock.
    const tooMany = a.acquire('tenant-1', 5, { maxWaitMs: 10 }).catch((e: unknown) => e)
    await cluster.step(20)
    expect(await tooMany).toMatchObject({ code: 'SLUICE_ERR_CLIENT_TIMEOUT' })
  })
})

describe('keys a caller sends (real sockets, manual clock)', () => {
  it('refuses a key the protocol cannot carry where it enters: a coded error, never tracked nor reported', async () => {
    cluster = new Cluster()
    await cluster.start(config())
    const client = await cluster.client('a')
    const errors: string[] = []
    client.on('error', (e) => errors.push(e.code))
    const f = client.keyed('apikey')
    await cluster.step(refreshMs)
    for (const bad of ['bad\u0085key', 'k'.repeat(1100), '*', ''])
      expect(() => f.tryAcquire(bad), JSON.stringify(bad.slice(0, 8))).toThrow(
        expect.objectContaining({ code: 'SLUICE_ERR_KEY_INVALID' }),
      )
    await expect(f.acquire('bad\u0085key')).rejects.toMatchObject({
      code: 'SLUICE_ERR_KEY_INVALID',
    })
    expect(f.size).toBe(0)
    for (let i = 0; i < 5; i++) await cluster.step(refreshMs)
    expect(client.connected).toBe(true)
    expect(errors).toEqual([])
  })

  it('reports more long hot keys than a frame holds in several frames, within the coordinator’s 64 KiB', async () => {
    cluster = new Cluster()
    await cluster.start(config({ maxHotKeys: 1000 }))
    const client = await cluster.client('a')
    const disconnects: number[] = []
    client.on('disconnect', (code) => disconnects.push(code))
    const f = client.keyed('apikey', { maxKeysPerReport: 500 })
    for (let i = 0; i < 30 && !((f.lease?.capacity ?? 0) > 0.99); i++) await cluster.step(refreshMs)
    await cluster.step(2000)
    // 500 keys of 256 characters, each asked past its burst: a report of ~140 KB, which one
    // frame would carry past the coordinator's 64 KiB (a close) and ws's 128 KiB (a cut).
    const key = (i: number): string => `${i}-`.padEnd(256, 'x')
    for (let i = 0; i < 500; i++) for (let j = 0; j < 12; j++) f.tryAcquire(key(i))
    await cluster.step(refreshMs)
    await cluster.step(refreshMs)
    expect(disconnects).toEqual([])
    expect(cluster.server.coordinator.view.families(0)[0]?.hotKeys).toBe(500)
  })
})

describe('a keyed family’s buckets', () => {
  const grant = (share: number): LeaseGrant => ({
    resource: 'k/*',
    kind: 'rate',
    capacity: share,
    burst: share,
    ttlMs: 10_000,
    refreshMs: 1000,
    safeCapacity: share,
    safeHoldMs: 1000,
    family: { kind: 'rate', capacity: 10, burst: 10 },
  })
  const owner = { requestEarlyReport: () => undefined, drained: () => undefined }
  /** A lease of key `a` of its own, of a key of 10/s, burst 10. */
  const keyLease = (capacity: number, extra: Partial<LeaseGrant> = {}): LeaseGrant => ({
    ...grant(capacity / 10),
    resource: 'k/a',
    capacity,
    burst: capacity,
    family: undefined,
    limit: { capacity: 10, burst: 10 },
    ...extra,
  })

  it('never forget a key that has spent anything: a key evicted and met again cannot start full twice', () => {
    const clock = new ManualClock()
    const f = new KeyedFamily('k', resolveKeyedOptions('k', { maxKeys: 2 }), clock, clock, owner)
    f.applyFamilyLease(grant(1))
    clock.advance(5000)
    // Key a spends its whole burst (10 tokens).
    let spent = 0
    while (f.tryAcquire('a')) spent++
    expect(spent).toBe(10)
    // Two more keys through a bound of two: b (full, untouched) is the one forgotten, not a.
    expect(f.tryAcquire('b')).toBe(true)
    clock.advance(200) // b refills its token
    expect(f.tryAcquire('c')).toBe(true)
    expect(f.size).toBe(2)
    // a is still known, and still spent: 2 tokens earned in 200 ms, not a fresh 10.
    let again = 0
    while (f.tryAcquire('a')) again++
    expect(again).toBe(2)
    // Every key holding less than full: a new key is refused rather than one forgotten early.
    expect(f.tryAcquire('d')).toBe(false)
    expect(f.keysFull).toBe(1)
    f.close()
  })

  it('start a new key full of what the share held before its last rise, plus what it earned since', () => {
    const clock = new ManualClock()
    const f = new KeyedFamily('k', resolveKeyedOptions('k', {}), clock, clock, owner)
    f.applyFamilyLease(grant(0))
    // The share rises from 0 to 1/2 (capacity moved here from a process that may have spent its
    // burst just before): a new key has earned nothing yet.
    f.applyFamilyLease(grant(0.5))
    expect(f.tryAcquire('a')).toBe(false)
    clock.advance(200) // 5 tokens/s for 0.2 s: one token
    expect(f.tryAcquire('b')).toBe(true)
    expect(f.tryAcquire('b')).toBe(false)
    // Long after the rise, a new key starts full: 5 tokens at once.
    clock.advance(5000)
    let admitted = 0
    while (f.tryAcquire('c')) admitted++
    expect(admitted).toBe(5)
    // A decrease takes effect at once on every key, spent or not.
    f.applyFamilyLease(grant(0.1))
    expect(f.leaseOf('d').capacity).toBeCloseTo(1, 9)
    let more = 0
    while (f.tryAcquire('e')) more++
    expect(more).toBe(1)
    f.close()
  })

  it('say of a key not seen yet what its first check would find: a first share that starts with part of its burst', () => {
    const clock = new ManualClock()
    const f = new KeyedFamily('k', resolveKeyedOptions('k', {}), clock, clock, owner)
    // A first share of the whole that starts with 4 of its 10 tokens (lease-out.ts, `fill`).
    f.applyFamilyLease({ ...grant(1), fill: 0.4 })
    // What remaining and msUntil say of a key before its first check: 4, not the share's 10.
    expect(f.remaining('a')).toBe(4)
    expect(f.msUntil('a', 5)).toBe(Infinity)
    expect(f.msUntil('a', 4)).toBe(0)
    // The rest is earned at the rate gained over what started full: 6 a second, 1.8 in 300 ms.
    clock.advance(300)
    expect(f.remaining('b')).toBe(5)
    let admitted = 0
    while (f.tryAcquire('b')) admitted++
    expect(admitted).toBe(5)
    // Once the share has earned its whole burst, a new key shows it.
    clock.advance(5000)
    expect(f.remaining('c')).toBe(10)
    f.close()
  })

  it('hold a fall’s gift that came unpaired above the burst, going as the giver’s excess would, and pass the fall’s part of it on', () => {
    const clock = new ManualClock()
    const family = (): KeyedFamily => {
      const f = new KeyedFamily('k', resolveKeyedOptions('k', {}), clock, clock, owner)
      // A first share of half, empty, with a gift of a fifth of every key's burst going at half
      // of each key's rate (server/pool/fall-gifts.ts: another rise took the falls' rate since).
      f.applyFamilyLease({
        ...grant(0.5),
        handed: { level: 0.2, keys: [], id: 'g1', goesAtShare: 0.5 },
      })
      return f
    }
    const f = family()
    // A key never seen: the gift's 2 tokens, spent first; the share earns from empty.
    let admitted = 0
    while (f.tryAcquire('a')) admitted++
    expect(admitted).toBe(2)
    // 400 ms on, a key never seen holds what is left of the gift (2 - 5/s x 0.4 = 0) and what
    // the share earned (2). Held as a full part, it held 2 and earned 3/s beside it: 3.2.
    clock.advance(400)
    expect(f.remaining('b')).toBe(2)
    f.close()
    // Another, falling 200 ms in to a third for a joiner (`handOn`): a key never seen held 1
    // of the share (none above the third) and 1 of the gift; it gives a third of the gift (0.33
    // of 10), going at a third of its rate beside the share that fell: 1/6 + 0.5/3.
    const g = family()
    clock.advance(200)
    g.applyFamilyLease({ ...grant(1 / 3), handOn: true })
    const held = g.takeFallHeld('k/*')!
    expect(held.level).toBeCloseTo(0.1 / 3, 6)
    expect(held.goesAtShare).toBeCloseTo(1 / 6 + 0.5 / 3, 6)
    g.close()
  })

  it('start a key leased on its own in a family lease’s batch from what the share held before that lease, not from what the lease starts the default split with', () => {
    const clock = new ManualClock()
    const family = (): KeyedFamily =>
      new KeyedFamily('k', resolveKeyedOptions('k', {}), clock, clock, owner)
    // A share that had lapsed (a restart of the coordinator), then a batch: a first share that
    // starts full and the lease of a key hot meanwhile. The key was never on this share.
    const f = family()
    f.applyFamilyLease({ ...grant(1), full: true })
    expect(f.remaining('a')).toBe(10)
    f.applyKeyLease('a', keyLease(3))
    expect(f.remaining('a')).toBe(0)
    // It earns at its lease's rate from there: 3 a second.
    clock.advance(1000)
    expect(f.remaining('a')).toBe(3)
    // A key never seen on the default split starts full as before.
    expect(f.remaining('b')).toBe(10)
    f.close()
    // A share held long before the batch: the key starts with what the share held of it
    // (half of 10), not with the whole share the lease gives now.
    const g = family()
    g.applyFamilyLease(grant(0.5))
    clock.advance(5000)
    g.applyFamilyLease({ ...grant(1), full: true })
    g.applyKeyLease('a', keyLease(8))
    expect(g.remaining('a')).toBe(5)
    // A key's lease later (it went hot while this share held): seeded from the default share
    // this process held, it starts with that (10), what is above its lease going as a fall's.
    clock.advance(10)
    g.applyKeyLease('c', keyLease(6))
    expect(g.remaining('c')).toBe(10)
    g.close()
  })

  it('start a new key with no more than it earned when the share falls soon after a rise', () => {
    const clock = new ManualClock()
    const f = new KeyedFamily('k', resolveKeyedOptions('k', {}), clock, clock, owner)
    f.applyFamilyLease(grant(0))
    // A process joins: the share rises to 1/2 (the other holder may have spent every key's
    // burst just before), then a third joins and it falls to 1/3, 100 ms on.
    f.applyFamilyLease(grant(0.5))
    clock.advance(100)
    f.applyFamilyLease(grant(1 / 3))
    // Earned since the rise: 100 ms at 10/3 tokens/s at most, below one token (it used to
    // start with a third of the burst, 3 tokens, at once).
    expect(f.tryAcquire('a')).toBe(false)
    clock.advance(300) // 0.4 s since the rise: one token at the share in force
    expect(f.tryAcquire('b')).toBe(true)
    expect(f.tryAcquire('b')).toBe(false)
    // Long after the rise, a new key starts full of the share in force.
    clock.advance(5000)
    let admitted = 0
    while (f.tryAcquire('c')) admitted++
    expect(admitted).toBe(3)
    f.close()
  })

  // A hot key's rise paid for by two falls made for it (`handOn`), as a joiner's is: one of a
  // bucket in parts, which keeps what no longer fits going as its excess, one of a plain bucket,
  // which gives it up (its ack's `gave`, the rise's `fill`). The rise held the gift as tokens of
  // its fresh part, earning at the whole rate gained, while the first fall's excess was paid for
  // by that same part: 500 ms on the three held 10.6 tokens of a key of burst 10 (the pool's
  // BurstSlack property, 'moveTwo', found the same). The gift is now an excess going at the rate
  // gained, spent first.
  it("hold a hot key's rise's gift as an excess going at the rate gained: together never more than the key's burst", () => {
    const clock = new ManualClock()
    const family = (): KeyedFamily =>
      new KeyedFamily('k', resolveKeyedOptions('k', {}), clock, clock, owner)
    // p holds 5 of the key in two parts (2.5, full, and a rise of 2.5 that earned 2.4); q holds 5, full.
    const p = family()
    const q = family()
    const j = family()
    for (const f of [p, q, j]) f.applyFamilyLease(grant(0.1))
    p.applyKeyLease('a', keyLease(2.5, { full: true }))
    p.applyKeyLease('a', keyLease(5))
    clock.advance(967)
    q.applyKeyLease('a', keyLease(5, { full: true }))
    j.applyKeyLease('a', keyLease(0))
    // Both fall to 10/3 for j; q gives up what its slice held, p keeps its excess going.
    p.applyKeyLease('a', keyLease(10 / 3, { handOn: true }))
    q.applyKeyLease('a', keyLease(10 / 3, { handOn: true }))
    expect(p.takeGave('k/a')).toBe(0)
    const gave = q.takeGave('k/a')
    expect(gave).toBeCloseTo(5 / 3, 9)
    j.applyKeyLease('a', keyLease(10 / 3, { fill: gave }))
    const spendable = (f: KeyedFamily): number => {
      let n = 0
      while (f.tryAcquire('a', 0.01)) n += 0.01
      return n
    }
    expect(j.remaining('a')).toBe(1)
    // Nothing spent for half a second, then all three spend what they hold at once: one central
    // bucket of the key holds its burst at most, 10.
    clock.advance(500)
    expect(spendable(p) + spendable(q) + spendable(j)).toBeLessThanOrEqual(10 + 0.03)
    // A key's share handed on whole from a process closed cleanly (`fillWhole`): the rise is
    // that share alone, and its fresh part holds the tokens, earning on from them.
    const h = family()
    h.applyFamilyLease(grant(0.1))
    h.applyKeyLease('a', keyLease(0))
    h.applyKeyLease('a', keyLease(10 / 3, { fill: 2, fillWhole: true }))
    clock.advance(300)
    expect(spendable(h)).toBeCloseTo(3, 1)
    // The same fill as a gift: an excess going at the rate gained, gone as the part earns.
    const g = family()
    g.applyFamilyLease(grant(0.1))
    g.applyKeyLease('a', keyLease(0))
    g.applyKeyLease('a', keyLease(10 / 3, { fill: 2 }))
    clock.advance(300)
    expect(spendable(g)).toBeCloseTo(2, 1)
    for (const f of [p, q, j, h, g]) f.close()
  })
})

describe('a keyed quota’s check at a window’s edge', () => {
  // Window 7 of a quota of 100 per key, this process's share a half; it ends 1 s after the lease.
  const quotaGrant = (window: number, endsInMs: number): LeaseGrant => ({
    resource: 'q/*',
    kind: 'quota',
    capacity: 0.5,
    burst: 0.5,
    ttlMs: endsInMs,
    refreshMs: 1000,
    safeCapacity: 0,
    safeHoldMs: 0,
    family: { kind: 'quota', capacity: 100, burst: 100 },
    window: { index: window, endsInMs, quota: 100, lengthMs: 60_000 },
  })
  const owner = (connected: boolean) => ({
    requestEarlyReport: () => undefined,
    drained: () => undefined,
    connected,
  })

  it('waits for the next window’s lease while connected, and is decided by it', async () => {
    const clock = new ManualClock()
    const f = new KeyedFamily('q', resolveKeyedOptions('q', {}), clock, clock, owner(true))
    f.applyFamilyLease(quotaGrant(7, 1000))
    expect(f.decide('a')).toBe(true)
    clock.advance(1000)
    const waiting = f.decide('a')
    expect(waiting).toBeInstanceOf(Promise)
    f.applyFamilyLease(quotaGrant(8, 60_000))
    expect(await waiting).toEqual({ admitted: true, retryAfterMs: 0, window: 8 })
    f.close()
  })

  it('claims in a hello nothing of a window that is over here (a restarted coordinator would take it for a lease its ledger does not know)', () => {
    const clock = new ManualClock()
    const f = new KeyedFamily('q', resolveKeyedOptions('q', {}), clock, clock, owner(true))
    f.applyFamilyLease(quotaGrant(7, 1000))
    // Key `a` leased on its own in window 7: 40 of its 100, spent until the window's end here.
    f.applyKeyLease('a', {
      ...quotaGrant(7, 1000),
      resource: 'q/a',
      capacity: 40,
      burst: 40,
      family: undefined,
    })
    expect(f.holdings().map((h) => [h.resource, h.capacity])).toEqual([
      ['q/*', 0.5],
      ['q/a', 40],
    ])
    clock.advance(999)
    expect(f.holdings()).toHaveLength(2)
    clock.advance(1)
    expect(f.holdings(), 'window 7 is over here: nothing of it is held').toEqual([])
    // Window 8's share: held again.
    f.applyFamilyLease(quotaGrant(8, 60_000))
    expect(f.holdings().map((h) => h.resource)).toEqual(['q/*'])
    f.close()
  })

  it('is refused at once while no connection is up (the next lease cannot come)', () => {
    const clock = new ManualClock()
    const f = new KeyedFamily('q', resolveKeyedOptions('q', {}), clock, clock, owner(false))
    f.applyFamilyLease(quotaGrant(7, 1000))
    clock.advance(1000)
    expect(f.decide('a')).toBe(false)
    f.close()
  })
})
