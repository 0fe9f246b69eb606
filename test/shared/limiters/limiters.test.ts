import fc from 'fast-check'
import { describe, expect, it } from 'vitest'
import {
  CompositeLimiter,
  FixedWindow,
  Gcra,
  KeyedLimiter,
  LeakyBucket,
  SlidingLog,
  SlidingWindowCounter,
  TokenBucketLimiter,
  type Limiter,
} from '../../../shared/limiters/index.js'
import { ManualClock, SluiceError } from '../../../shared/index.js'

/** A sequence of (wait, cost) steps: integer milliseconds and whole tokens. */
const steps = fc.array(fc.tuple(fc.nat(150), fc.integer({ min: 1, max: 3 })), {
  minLength: 1,
  maxLength: 150,
})
// Emission intervals that are powers of two in ms keep both the bucket's and GCRA's arithmetic exact.
const intervalMs = fc.constantFrom(1, 2, 4, 8, 16, 32, 64, 128)
const burst = fc.integer({ min: 1, max: 20 })

function drive(
  clock: ManualClock,
  limiter: Limiter,
  seq: ReadonlyArray<readonly [number, number]>,
): Array<{ t: number; cost: number; ok: boolean }> {
  return seq.map(([wait, cost]) => {
    clock.advance(wait)
    return { t: clock.now(), cost, ok: limiter.tryAcquire(cost) }
  })
}

describe('TokenBucketLimiter', () => {
  it('never admits more than rate·t + burst over any interval', () => {
    fc.assert(
      fc.property(fc.integer({ min: 1, max: 200 }), burst, steps, (ratePerSec, b, seq) => {
        const clock = new ManualClock()
        const admitted = drive(
          clock,
          new TokenBucketLimiter({ ratePerSec, burst: b, clock }),
          seq,
        ).filter((d) => d.ok)
        // Every interval [i, j] of admissions, checked with plain comparisons: an `expect` per
        // pair made this property take 8 s (42 s in a loaded CI run) for the same check.
        let worst: string | undefined = undefined
        for (let i = 0; i < admitted.length && worst === undefined; i++) {
          let sum = 0
          for (let j = i; j < admitted.length; j++) {
            sum += admitted[j]!.cost
            const bound = (ratePerSec * (admitted[j]!.t - admitted[i]!.t)) / 1000 + b + 1e-9
            if (sum > bound) {
              worst = `${sum} admitted in [${admitted[i]!.t}, ${admitted[j]!.t}] ms, bound ${bound}`
              break
            }
          }
        }
        expect(worst).toBeUndefined()
      }),
    )
  })

  it('shapes acquire: waits msUntil, in FIFO order, and refuses a cost above the burst at once', async () => {
    const clock = new ManualClock()
    const limiter = new TokenBucketLimiter({ ratePerSec: 10, burst: 1, clock })
    expect(limiter.tryAcquire()).toBe(true)
    expect(limiter.msUntil()).toBe(100)
    const order: number[] = []
    const done = [1, 2].map((i) => limiter.acquire().then(() => order.push(i)))
    expect(limiter.tryAcquire()).toBe(false) // no jumping the queue
    clock.advance(100)
    await Promise.resolve()
    clock.advance(100)
    await Promise.all(done)
    expect(order).toEqual([1, 2])
    await expect(limiter.acquire(5)).rejects.toMatchObject({
      code: 'SLUICE_ERR_LIMITER_COST_TOO_HIGH',
    })
  })

  it('tells the state a take left at its reading, reading no clock, as remaining and msUntilReset would then', () => {
    const clock = new ManualClock()
    let reads = 0
    const counting = Object.assign(Object.create(clock) as ManualClock, {
      now: () => (reads++, clock.now()),
    })
    const limiter = new TokenBucketLimiter({ ratePerSec: 10, burst: 5, clock: counting })
    expect(limiter.tryAcquire(2)).toBe(true)
    reads = 0
    expect(limiter.remainingAtLastReading()).toBe(3)
    expect(limiter.msUntilResetAtLastReading()).toBe(200)
    expect(reads).toBe(0)
    expect([limiter.remaining(), limiter.msUntilReset()]).toEqual([3, 200])
    // Time passes unread: the last reading's state stands; a fresh read sees the refill.
    clock.advance(150)
    expect(limiter.tryAcquire(0.5)).toBe(true)
    expect(limiter.remainingAtLastReading()).toBe(4)
    expect(limiter.msUntilResetAtLastReading()).toBeCloseTo(100)
    clock.advance(100)
    expect(limiter.remainingAtLastReading()).toBe(4)
    expect(limiter.remaining()).toBe(5)
    expect(limiter.msUntilResetAtLastReading()).toBe(0)
  })

  it('rejects invalid options naming the option and the value', () => {
    expect(() => new TokenBucketLimiter({ ratePerSec: -1 })).toThrow(
      /ratePerSec must be a finite number > 0, received -1/,
    )
    expect(() => new TokenBucketLimiter({ ratePerSec: 1, burst: NaN })).toThrow(SluiceError)
  })
})

describe('GCRA and the leaky bucket (meter)', () => {
  it('admit exactly what a token bucket of the same rate and burst admits', () => {
    fc.assert(
      fc.property(intervalMs, burst, steps, (interval, b, seq) => {
        const ratePerSec = 1000 / interval
        const make = <T extends Limiter>(f: (clock: ManualClock) => T): boolean[] => {
          const clock = new ManualClock()
          return drive(clock, f(clock), seq).map((d) => d.ok)
        }
        const bucket = make((clock) => new TokenBucketLimiter({ ratePerSec, burst: b, clock }))
        expect(make((clock) => new Gcra({ ratePerSec, burst: b, clock }))).toEqual(bucket)
        expect(make((clock) => new LeakyBucket({ ratePerSec, burst: b, clock }))).toEqual(bucket)
      }),
    )
  })
})

describe('window limiters', () => {
  const limit = fc.integer({ min: 1, max: 12 })
  const windowMs = fc.integer({ min: 10, max: 400 })

  it('SlidingLog admits exactly what the definition admits, holding at most `limit` entries', () => {
    fc.assert(
      fc.property(limit, windowMs, steps, (l, w, seq) => {
        const clock = new ManualClock()
        const log = new SlidingLog({ limit: l, windowMs: w, clock })
        const history: Array<{ t: number; cost: number }> = []
        for (const [wait, cost] of seq) {
          clock.advance(wait)
          const t = clock.now()
          const inWindow = history.filter((h) => h.t > t - w).reduce((s, h) => s + h.cost, 0)
          const expected = inWindow + cost <= l
          expect(log.tryAcquire(cost)).toBe(expected)
          if (expected) history.push({ t, cost })
          expect(log.size).toBeLessThanOrEqual(l)
        }
      }),
    )
  })

  it('SlidingLog.msUntil is the wait after which the cost is admitted, and not a millisecond earlier', () => {
    fc.assert(
      fc.property(limit, windowMs, steps, fc.integer({ min: 1, max: 3 }), (l, w, seq, cost) => {
        fc.pre(cost <= l)
        const clock = new ManualClock()
        const log = new SlidingLog({ limit: l, windowMs: w, clock })
        drive(clock, log, seq)
        const wait = log.msUntil(cost)
        if (wait > 0) {
          clock.advance(wait - 1)
          expect(log.msUntil(cost)).toBeGreaterThan(0)
          clock.advance(1)
        }
        expect(log.tryAcquire(cost)).toBe(true)
      }),
    )
  })

  it('FixedWindow admits exactly `limit` per aligned window', () => {
    fc.assert(
      fc.property(limit, windowMs, steps, (l, w, seq) => {
        const clock = new ManualClock()
        const used = new Map<number, number>()
        for (const d of drive(clock, new FixedWindow({ limit: l, windowMs: w, clock }), seq)) {
          const win = Math.floor(d.t / w)
          const expected = (used.get(win) ?? 0) + d.cost <= l
          expect(d.ok).toBe(expected)
          if (d.ok) used.set(win, (used.get(win) ?? 0) + d.cost)
        }
      }),
    )
  })

  it('SlidingWindowCounter never admits more than `limit` in an aligned window, nor more than twice it in any window', () => {
    fc.assert(
      fc.property(limit, windowMs, steps, (l, w, seq) => {
        const clock = new ManualClock()
        const admitted = drive(
          clock,
          new SlidingWindowCounter({ limit: l, windowMs: w, clock }),
          seq,
        ).filter((d) => d.ok)
        const perWindow = new Map<number, number>()
        for (const d of admitted)
          perWindow.set(Math.floor(d.t / w), (perWindow.get(Math.floor(d.t / w)) ?? 0) + d.cost)
        for (const total of perWindow.values()) expect(total).toBeLessThanOrEqual(l)
        for (const a of admitted) {
          const sum = admitted
            .filter((d) => d.t > a.t - w && d.t <= a.t)
            .reduce((s, d) => s + d.cost, 0)
          expect(sum).toBeLessThanOrEqual(2 * l)
        }
      }),
    )
  })
})

describe('CompositeLimiter', () => {
  it('debits all parts or none: a refused check leaves every part as it was', () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 1, max: 50 }),
        burst,
        fc.integer({ min: 1, max: 12 }),
        fc.integer({ min: 10, max: 400 }),
        steps,
        (rate, b, l, w, seq) => {
          const clock = new ManualClock()
          const bucket = new TokenBucketLimiter({ ratePerSec: rate, burst: b, clock })
          const window = new FixedWindow({ limit: l, windowMs: w, clock })
          const composite = new CompositeLimiter([bucket, window], clock)
          for (const [wait, cost] of seq) {
            clock.advance(wait)
            const before = [1, 2, 3].map((c) => [bucket.msUntil(c), window.msUntil(c)])
            const bothFree = bucket.msUntil(cost) === 0 && window.msUntil(cost) === 0
            const ok = composite.tryAcquire(cost)
            expect(ok).toBe(bothFree)
            if (!ok)
              expect([1, 2, 3].map((c) => [bucket.msUntil(c), window.msUntil(c)])).toEqual(before)
          }
        },
      ),
    )
  })
})

describe('KeyedLimiter', () => {
  it('keeps at most maxKeys keys, evicting the least recently used', () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 1, max: 8 }),
        fc.array(fc.integer({ min: 0, max: 30 }), { maxLength: 200 }),
        (maxKeys, keys) => {
          const clock = new ManualClock()
          const keyed = new KeyedLimiter<number>(
            () => new TokenBucketLimiter({ ratePerSec: 1, burst: 1, clock }),
            { maxKeys, clock },
          )
          for (const k of keys) {
            keyed.tryAcquire(k)
            expect(keyed.size).toBeLessThanOrEqual(maxKeys)
          }
        },
      ),
    )
  })

  it('evicts the least recently used to within a second (a hit moves a key at most once a second)', () => {
    const clock = new ManualClock()
    const made: string[] = []
    const keyed = new KeyedLimiter(
      (key: string) => (made.push(key), new TokenBucketLimiter({ ratePerSec: 1, burst: 5, clock })),
      { maxKeys: 2, clock },
    )
    keyed.tryAcquire('a')
    clock.advance(10)
    keyed.tryAcquire('b')
    clock.advance(1000)
    keyed.tryAcquire('a') // a second after it was made: a moves to the recent end
    keyed.tryAcquire('c') // evicts b, the least recently used
    keyed.tryAcquire('a')
    expect(made).toEqual(['a', 'b', 'c'])
    keyed.tryAcquire('b') // evicts a: made before c, and not moved since (same instant)
    expect(made).toEqual(['a', 'b', 'c', 'b'])
    // Within the second, a hit does not move a key: c, used 1 ms after b was made, is still
    // older in the order, so d evicts c rather than b.
    clock.advance(1)
    keyed.tryAcquire('c')
    keyed.tryAcquire('d')
    expect(keyed.size).toBe(2)
    keyed.tryAcquire('b')
    expect(made).toEqual(['a', 'b', 'c', 'b', 'd'])
    keyed.tryAcquire('c')
    expect(made).toEqual(['a', 'b', 'c', 'b', 'd', 'c'])
  })

  it('forgets a key idle for idleMs: it starts fresh', () => {
    const clock = new ManualClock()
    let made = 0
    const keyed = new KeyedLimiter(
      () => (made++, new TokenBucketLimiter({ ratePerSec: 0.001, burst: 1, clock })),
      { idleMs: 1000, clock },
    )
    expect(keyed.tryAcquire('ip-1')).toBe(true)
    expect(keyed.tryAcquire('ip-1')).toBe(false)
    clock.advance(999)
    expect(keyed.tryAcquire('ip-1')).toBe(false)
    clock.advance(1000)
    expect(keyed.tryAcquire('ip-1')).toBe(true)
    expect(made).toBe(2)
  })
})
