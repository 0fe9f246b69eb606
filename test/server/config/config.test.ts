import { describe, expect, it } from 'vitest'
import {
  CompiledConfig,
  PatternList,
  copySettings,
  globToRegExp,
  parseConfig,
  parseConfigText,
} from '../../../server/config/index.js'
import { SluiceError } from '../../../shared/index.js'

function refusal(input: unknown): SluiceError {
  try {
    parseConfig(input)
  } catch (error) {
    expect(error).toBeInstanceOf(SluiceError)
    return error as SluiceError
  }
  throw new Error('config accepted')
}

describe('a keyed family’s keys’ settings', () => {
  const compiled = new CompiledConfig(
    parseConfig({
      tenants: { capped: { token: 'capped-token-0123456789', caps: { 'ip/vip': 5 } } },
      resources: [
        {
          match: 'ip/*',
          keyed: true,
          kind: 'rate',
          capacity: 20,
          keys: { big: { capacity: 100 } },
        },
      ],
    }),
  )
  // Every setting of a key, own or inherited: what the pool and the views read.
  const all = (s: object): Record<string, unknown> => {
    const out: Record<string, unknown> = {}
    for (const k in s) out[k] = (s as Record<string, unknown>)[k]
    return out
  }

  it('reads the same whether a key shares the family’s (its capacity, no cap of its own) or has its own', () => {
    const a = compiled.settingsFor('ip/10.0.0.1')!
    const b = compiled.settingsFor('ip/10.0.0.2')!
    // Shared: only the id is the key's own.
    expect(Object.keys(a)).toEqual(['id'])
    expect(Object.getPrototypeOf(a)).toBe(Object.getPrototypeOf(b))
    expect([a.id, a.kind, a.capacity, a.burst, a.family?.role]).toEqual([
      'ip/10.0.0.1',
      'rate',
      20,
      20,
      'key',
    ])
    expect(Object.isFrozen(a)).toBe(true)
    // A planned key and a capped one are built whole; apart from what differs, they read alike.
    const planned = compiled.settingsFor('ip/big')!
    const capped = compiled.settingsFor('ip/vip')!
    expect(Object.keys(planned).length).toBeGreaterThan(10)
    expect(planned.capacity).toBe(100)
    expect(capped.tenants.capped).toEqual({ weight: 1, cap: 5 })
    expect(all(capped)).toEqual({ ...all(a), id: 'ip/vip', tenants: capped.tenants })
    expect(all(planned)).toEqual({ ...all(a), id: 'ip/big', capacity: 100, burst: 100 })
  })

  it('estimates a key’s demand by the most of its last five reports, the family’s own as a named rate’s, unless told', () => {
    expect(compiled.settingsFor('ip/10.0.0.1')).toMatchObject({ estimator: 'max', window: 5 })
    expect(compiled.settingsFor('ip/big')).toMatchObject({ estimator: 'max', window: 5 })
    expect(compiled.settingsFor('ip/*')).toMatchObject({ estimator: 'fast', window: 1 })
    const told = new CompiledConfig(
      parseConfig({
        resources: [
          { match: 'ip/*', keyed: true, kind: 'rate', capacity: 20, demand: { estimator: 'fast' } },
        ],
      }),
    )
    expect(told.settingsFor('ip/a')).toMatchObject({ estimator: 'fast', window: 1 })
  })

  it('copySettings copies what a key inherits, where a spread would copy its id alone', () => {
    const a = compiled.settingsFor('ip/10.0.0.1')!
    const copy = copySettings(a, { capacity: 0, burst: 0 })
    expect(all(copy)).toEqual({ ...all(a), capacity: 0, burst: 0 })
    expect(Object.isFrozen(copy)).toBe(true)
    expect({ ...a }).toEqual({ id: 'ip/10.0.0.1' })
  })
})

describe('config', () => {
  it('fills defaults for everything but match, kind and capacity', () => {
    const config = parseConfig({ resources: [{ match: 'api', kind: 'rate', capacity: 1000 }] })
    expect(config.server).toMatchObject({ host: '127.0.0.1', port: 7070 })
    expect(config.server.limits).toMatchObject({
      maxFrameBytes: 65536,
      maxResourcesPerClient: 256,
      maxMessagesPerSec: 50,
    })
    expect(config.resources[0]).toMatchObject({
      algorithm: 'fair-share',
      surplus: 'spread',
      leaseTtlMs: 10000,
      refreshMs: 1000,
      graceMs: 2000,
    })
    const settings = new CompiledConfig(config).settingsFor('api')!
    expect(settings).toMatchObject({
      estimator: 'fast',
      window: 1,
      burst: 1000,
      learningMs: 17000,
      safeHoldMs: 5000,
      safeCapacity: undefined,
      headroomTolerance: 0.1,
    })
  })

  it('sizes a quota’s blocks by the peak of the last 5 reports unless told otherwise', () => {
    const quota = { match: 'mail', kind: 'quota', capacity: 100, window: '1h' }
    const settings = (extra: object) =>
      new CompiledConfig(parseConfig({ resources: [{ ...quota, ...extra }] })).settingsFor('mail')!
    expect(settings({})).toMatchObject({ estimator: 'max', window: 5 })
    expect(settings({ demand: { estimator: 'fast' } })).toMatchObject({
      estimator: 'fast',
      window: 1,
    })
  })

  it('names the field and what it needs without a dump of the whole template (#42.8)', () => {
    const error = refusal({ resources: [{ match: 'mail', kind: 'quota', capacity: 100 }] })
    expect(error.message).toContain('resources[0].window: a quota needs its window')
    expect(error.message).not.toContain('received {')
    // A value is still named when it is one.
    expect(refusal({ resources: [{ match: 'a', kind: 'rate', capacity: -1 }] }).message).toMatch(
      /capacity.*received -1/,
    )
  })

  it('ends a quota’s leases windowGraceMs before the window (250 ms by default), not graceMs', () => {
    const settings = (extra: object) =>
      new CompiledConfig(
        parseConfig({ resources: [{ match: 'mail', kind: 'quota', capacity: 100, ...extra }] }),
      ).settingsFor('mail')!
    expect(settings({ window: '1h' }).graceMs).toBe(250)
    expect(settings({ window: '1h', windowGraceMs: 40, graceMs: 3000 }).graceMs).toBe(40)
    // A rate keeps graceMs.
    const rate = new CompiledConfig(
      parseConfig({
        resources: [{ match: 'api', kind: 'rate', capacity: 1, graceMs: 3000, windowGraceMs: 40 }],
      }),
    ).settingsFor('api')!
    expect(rate.graceMs).toBe(3000)
    expect(
      refusal({
        resources: [
          { match: 'm', kind: 'quota', capacity: 1, window: '1h', windowGraceMs: 61_000 },
        ],
      }).message,
    ).toContain('windowGraceMs')
  })

  it('applies a headroom tolerance only with surplus spread, and bounds it', () => {
    const base = { match: 'api', kind: 'rate', capacity: 10 }
    const compiled = (extra: object) =>
      new CompiledConfig(parseConfig({ resources: [{ ...base, ...extra }] })).settingsFor('api')!
    expect(compiled({ headroomTolerance: 0.25 }).headroomTolerance).toBe(0.25)
    expect(compiled({ surplus: 'hold', headroomTolerance: 0.25 }).headroomTolerance).toBe(0)
    for (const bad of [-0.1, 0.6, 'x']) {
      const error = refusal({ resources: [{ ...base, headroomTolerance: bad }] })
      expect(error.message).toContain('headroomTolerance')
    }
  })

  it('refuses a learning period shorter than a commitment’s life unless marked unsafe, naming the field and the figures', () => {
    const base = { match: 'api', kind: 'rate', capacity: 10 }
    const error = refusal({ resources: [{ ...base, learningMs: 0 }] })
    expect(error.code).toBe('SLUICE_ERR_CONFIG_INVALID')
    expect(error.message).toContain('resources[0].learningMs')
    expect(error.message).toContain('17000')
    expect(error.message).toContain('unsafeLearning')
    expect(() =>
      parseConfig({ resources: [{ ...base, learningMs: 0, unsafeLearning: true }] }),
    ).not.toThrow()
    expect(() =>
      parseConfig({
        resources: [
          { ...base, leaseTtlMs: 4000, graceMs: 1000, safeHoldMs: 1000, learningMs: 6000 },
        ],
      }),
    ).not.toThrow()
    expect(
      refusal({
        resources: [
          { ...base, leaseTtlMs: 4000, graceMs: 1000, safeHoldMs: 1000, learningMs: 5999 },
        ],
      }).message,
    ).toContain('6000')
  })

  it('names the value received, where it is in the file, and the key meant by a misspelled one', () => {
    const text =
      'server:\n  prot: 7070\nresources:\n  - match: api\n    kind: rates\n    capacity: -5\n    leaseTTLMs: 100\n'
    let message = ''
    try {
      parseConfigText(text, 'sluice.yaml')
    } catch (error) {
      message = (error as SluiceError).message
    }
    expect(message).toContain('line 2, column 3: server: unknown key prot (did you mean port?)')
    expect(message).toContain('line 5, column 11: resources[0].kind')
    expect(message).toContain('received "rates"')
    expect(message).toContain('line 6, column 15: resources[0].capacity')
    expect(message).toContain('received -5')
    expect(message).toContain('unknown key leaseTTLMs (did you mean leaseTtlMs?)')
  })

  it('reads a rate per minute or hour, its burst the whole amount unless set (#42.1)', () => {
    const config = new CompiledConfig(
      parseConfig({
        resources: [
          { match: 'apikey/*', keyed: true, kind: 'rate', capacity: 100, per: '1m' },
          { match: 'export', kind: 'rate', capacity: 3600, per: '1h', burst: 10 },
          {
            match: 'plan/*',
            keyed: true,
            kind: 'rate',
            capacity: 60,
            per: '1m',
            keys: { gold: { capacity: 600 } },
          },
        ],
      }),
    )
    const perMinute = config.settingsFor('apikey/k')!
    expect(perMinute.capacity).toBeCloseTo(100 / 60, 12)
    expect(perMinute.burst).toBe(100)
    const perHour = config.settingsFor('export')!
    expect(perHour.capacity).toBeCloseTo(1, 12)
    expect(perHour.burst).toBe(10)
    const gold = config.settingsFor('plan/gold')!
    expect(gold.capacity).toBeCloseTo(10, 12)
    expect(gold.burst).toBe(600)
  })

  it('says what to write where a field cannot work (#42.8)', () => {
    const quota = { match: 'q', kind: 'quota', capacity: 100, window: '1d' }
    expect(refusal({ resources: [{ ...quota, per: '1m' }] }).message).toContain(
      'per is for kind: rate; a quota is a budget per window: window: 1m',
    )
    expect(refusal({ resources: [{ ...quota, burst: 5 }] }).message).toContain(
      'burst is for kind: rate',
    )
    expect(
      refusal({ resources: [{ match: 'c', kind: 'concurrency', capacity: 5, burst: 5 }] }).message,
    ).toContain('burst is for kind: rate')
    expect(refusal({ resources: [{ ...quota, window: 60 }] }).message).toContain(
      "a duration as text with its unit, such as '60s' or '1m'; received the number 60",
    )
    expect(
      refusal({ resources: [{ match: 'r', kind: 'rate', capacity: 1, per: '1 fortnight' }] })
        .message,
    ).toContain('a duration of a second or more, such as 1s, 1m or 1h; received "1 fortnight"')
  })

  it('is frozen once parsed', () => {
    const config = parseConfig({ resources: [{ match: 'api', kind: 'rate', capacity: 1 }] })
    expect(Object.isFrozen(config)).toBe(true)
    expect(Object.isFrozen(config.resources[0])).toBe(true)
  })

  it.each([
    [{ resources: [{ match: 'a', kind: 'rate', capacity: -1 }] }, 'resources[0].capacity'],
    [{ resources: [{ match: 'a', kind: 'speed', capacity: 1 }] }, 'resources[0].kind'],
    [{ resources: [{ match: 'a', kind: 'rate', capacity: 1, extra: true }] }, 'extra'],
    [
      { resources: [{ match: 'a', kind: 'rate', capacity: 1, refreshMs: 5000, leaseTtlMs: 1000 }] },
      'resources[0].refreshMs',
    ],
    [{ resources: [] }, 'resources'],
    [
      { server: { port: 70000 }, resources: [{ match: 'a', kind: 'rate', capacity: 1 }] },
      'server.port',
    ],
    [
      {
        tenants: { a: { token: 'same-token-1' }, b: { token: 'same-token-1' } },
        resources: [{ match: 'a', kind: 'rate', capacity: 1 }],
      },
      'tenants.b.token',
    ],
  ])('refuses %j naming %s', (input, field) => {
    const error = refusal(input)
    expect(error.code).toBe('SLUICE_ERR_CONFIG_INVALID')
    expect(error.message).toContain(field)
  })

  it('reads YAML and JSON text', () => {
    expect(
      parseConfigText('resources:\n  - match: "x/*"\n    kind: concurrency\n    capacity: 20\n')
        .resources[0]!.kind,
    ).toBe('concurrency')
    expect(
      parseConfigText('{"resources":[{"match":"x","kind":"rate","capacity":2}]}').resources[0]!
        .capacity,
    ).toBe(2)
    expect(() => parseConfigText(': : :')).toThrow(SluiceError)
  })

  it('applies tenant weights, caps by pattern and resource allow lists', () => {
    const compiled = new CompiledConfig(
      parseConfig({
        tenants: {
          checkout: {
            token: 'checkout-token',
            weight: 3,
            caps: { 'payments-*': 400 },
            resources: ['payments-*', 'search'],
          },
        },
        resources: [{ match: '*', kind: 'rate', capacity: 1000 }],
      }),
    )
    expect(compiled.tenantByToken('checkout-token')).toBe('checkout')
    expect(compiled.settingsFor('payments-api')!.tenants).toEqual({
      checkout: { weight: 3, cap: 400 },
    })
    expect(compiled.settingsFor('search')!.tenants).toEqual({ checkout: { weight: 3 } })
    expect(compiled.allows('checkout', 'payments-eu')).toBe(true)
    expect(compiled.allows('checkout', 'search')).toBe(true)
    expect(compiled.allows('checkout', 'admin')).toBe(false)
    expect(compiled.allows(undefined, 'admin')).toBe(true)
  })
})

describe('templates', () => {
  it('matches exact ids first, then globs in order', () => {
    const list = new PatternList([
      ['a*', 'glob-a'],
      ['*', 'any'],
      ['abc', 'exact'],
    ])
    expect(list.match('abc')).toBe('exact')
    expect(list.match('abd')).toBe('glob-a')
    expect(list.match('zzz')).toBe('any')
  })

  it('lets * and ? match any character, / included, and supports classes', () => {
    expect(globToRegExp('tenant/*').test('tenant/a/b/c')).toBe(true)
    expect(globToRegExp('a?c').test('a/c')).toBe(true)
    expect(globToRegExp('db-[0-9]').test('db-7')).toBe(true)
    expect(globToRegExp('db-[!0-9]').test('db-7')).toBe(false)
    expect(globToRegExp('db-[!0-9]').test('db-x')).toBe(true)
    expect(globToRegExp('a.b+(c)').test('a.b+(c)')).toBe(true)
    expect(globToRegExp('a.b').test('axb')).toBe(false)
    expect(globToRegExp('[unclosed').test('[unclosed')).toBe(true)
  })

  it('answers undefined when nothing matches', () => {
    expect(
      new CompiledConfig(
        parseConfig({ resources: [{ match: 'only', kind: 'rate', capacity: 1 }] }),
      ).settingsFor('other'),
    ).toBeUndefined()
  })
})
