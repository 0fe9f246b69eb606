import fc from 'fast-check'
import { describe, expect, it } from 'vitest'
import {
  AdaptiveThrottle,
  AimdConcurrencyLimit,
  LeakyQueue,
  Semaphore,
  WarmUpLimiter,
} from '../../../shared/limiters/index.js'
import { ManualClock } from '../../../shared/index.js'

describe('LeakyQueue', () => {
  it('lets admissions out no closer than cost / rate apart: the output never bursts', () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 1, max: 100 }),
        fc.array(fc.tuple(fc.nat(100), fc.integer({ min: 1, max: 3 })), { maxLength: 100 }),
        (ratePerSec, seq) => {
          const clock = new ManualClock()
          const q = new LeakyQueue({ ratePerSec, clock })
          let last: { t: number; cost: number } | undefined
          for (const [wait, cost] of seq) {
            clock.advance(wait)
            if (!q.tryAcquire(cost)) continue
            if (last !== undefined)
              expect(clock.now() - last.t).toBeGreaterThanOrEqual(
                (last.cost * 1000) / ratePerSec - 1e-9,
              )
            last = { t: clock.now(), cost }
          }
        },
      ),
    )
  })

  it('queues callers up to maxQueue and releases one per cost / rate', async () => {
    const clock = new ManualClock()
    const q = new LeakyQueue({ ratePerSec: 10, maxQueue: 2, clock })
    const all = [q.acquire(), q.acquire(), q.acquire()] // the first goes at once, two wait
    expect(q.waiting).toBe(2)
    await expect(q.acquire()).rejects.toMatchObject({ code: 'SLUICE_ERR_CLIENT_QUEUE_FULL' })
    clock.advance(99)
    expect(q.waiting).toBe(2)
    clock.advance(1)
    expect(q.waiting).toBe(1)
    clock.advance(100)
    expect(q.waiting).toBe(0)
    await Promise.all(all)
  })
})

describe('WarmUpLimiter', () => {
  function admittedPerSecond(
    limiter: WarmUpLimiter,
    clock: ManualClock,
    seconds: number,
  ): number[] {
    const out: number[] = []
    for (let s = 0; s < seconds; s++) {
      let n = 0
      for (let t = 0; t < 1000; t += 5) {
        for (let k = 0; k < 10; k++) if (limiter.tryAcquire()) n++
        clock.advance(5)
      }
      out.push(n)
    }
    return out
  }

  it('starts at rate / coldFactor and ramps to the full rate over warmupMs of use', () => {
    const clock = new ManualClock()
    const limiter = new WarmUpLimiter({
      ratePerSec: 300,
      warmupMs: 3000,
      coldFactor: 3,
      burst: 5,
      clock,
    })
    const rates = admittedPerSecond(limiter, clock, 5)
    expect(rates[0]).toBeLessThan(150) // cold: ~100-167/s during the first second
    expect(rates[0]).toBeGreaterThan(90)
    expect(rates[1]!).toBeGreaterThan(rates[0]!)
    expect(rates[4]).toBeGreaterThanOrEqual(295) // warm
    expect(rates[4]).toBeLessThanOrEqual(301)
  })

  it('cools down again after warmupMs unused', () => {
    const clock = new ManualClock()
    const limiter = new WarmUpLimiter({ ratePerSec: 300, warmupMs: 1000, burst: 5, clock })
    admittedPerSecond(limiter, clock, 3)
    clock.advance(5000)
    expect(admittedPerSecond(limiter, clock, 1)[0]).toBeLessThan(250)
  })
})

describe('Semaphore', () => {
  it('never has more than `limit` slots in use, serving waiters in order', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.integer({ min: 1, max: 5 }),
        fc.array(fc.boolean(), { maxLength: 60 }),
        async (limit, ops) => {
          const sem = new Semaphore({ limit })
          const held: Array<{ release(): void }> = []
          const order: number[] = []
          let n = 0
          for (const take of ops) {
            if (take) {
              const id = n++
              void sem.acquire().then((h) => {
                order.push(id)
                held.push(h)
              })
            } else held.shift()?.release()
            await Promise.resolve()
            await Promise.resolve()
            expect(sem.inUse).toBeLessThanOrEqual(limit)
          }
          expect(order).toEqual([...order].sort((a, b) => a - b))
        },
      ),
    )
  })
})

describe('AimdConcurrencyLimit', () => {
  it('grows by one per limit’s worth of healthy completions and halves on an error or a slow one', () => {
    const aimd = new AimdConcurrencyLimit({
      initialLimit: 4,
      maxLimit: 100,
      latencyThresholdMs: 200,
    })
    for (let i = 0; i < 4; i++) {
      expect(aimd.tryAcquire()).toBe(true)
      aimd.complete({ ok: true, latencyMs: 10 })
    }
    expect(aimd.limit).toBeGreaterThan(4.9)
    expect(aimd.limit).toBeLessThan(5.1)
    aimd.tryAcquire()
    aimd.complete({ ok: false })
    expect(aimd.limit).toBeCloseTo(aimd.limit, 6)
    const afterError = aimd.limit
    expect(afterError).toBeLessThan(2.6)
    aimd.tryAcquire()
    aimd.complete({ ok: true, latencyMs: 500 })
    expect(aimd.limit).toBeLessThan(afterError)
  })

  it('stays within [minLimit, maxLimit] and never admits past floor(limit)', () => {
    fc.assert(
      fc.property(
        fc.array(fc.oneof(fc.constant('take'), fc.constant('ok'), fc.constant('err')), {
          maxLength: 300,
        }),
        (ops) => {
          const aimd = new AimdConcurrencyLimit({ initialLimit: 5, minLimit: 2, maxLimit: 8 })
          let inUse = 0
          for (const op of ops) {
            if (op === 'take') {
              if (aimd.tryAcquire()) inUse++
            } else if (inUse > 0) {
              aimd.complete({ ok: op === 'ok' })
              inUse--
            }
            expect(aimd.limit).toBeGreaterThanOrEqual(2)
            expect(aimd.limit).toBeLessThanOrEqual(8)
            expect(aimd.inUse).toBe(inUse)
          }
        },
      ),
    )
  })
})

describe('AdaptiveThrottle', () => {
  it('rejects locally with probability max(0, (requests − K·accepts) / (requests + 1))', () => {
    const clock = new ManualClock(5_000)
    let u = 0
    const throttle = new AdaptiveThrottle({ k: 2, clock, random: () => u })
    for (let i = 0; i < 100; i++) {
      throttle.tryAcquire()
      if (i < 10) throttle.recordAccept()
    }
    expect(throttle.rejectProbability).toBeCloseTo((100 - 2 * 10) / 101, 9)
    u = 0.5
    expect(throttle.tryAcquire()).toBe(false) // 0.5 < p ≈ 0.79
    u = 0.9
    expect(throttle.tryAcquire()).toBe(true)
  })

  it('never rejects while the backend accepts at least 1/K of requests, and forgets after the window', async () => {
    const clock = new ManualClock(5_000)
    const throttle = new AdaptiveThrottle({ k: 2, windowMs: 10_000, clock, random: () => 0 })
    for (let i = 0; i < 100; i++) {
      throttle.tryAcquire()
      if (i % 2 === 0) throttle.recordAccept()
    }
    expect(throttle.rejectProbability).toBe(0)
    for (let i = 0; i < 100; i++) throttle.tryAcquire()
    expect(throttle.rejectProbability).toBeGreaterThan(0.4)
    clock.advance(10_000)
    expect(throttle.rejectProbability).toBe(0)
    await expect(
      new AdaptiveThrottle({ clock, random: () => 0 }).acquire(),
    ).resolves.toBeUndefined()
  })
})
