import fc from 'fast-check'
import { describe, expect, it } from 'vitest'
import { domainLimits as L } from '../../../shared/domain.js'
import { decodeClientMessage, decodeServerMessage } from '../../../shared/protocol/codec.js'
import { acceptHotMessage, acceptHotServerMessage } from '../../../shared/protocol/hot-path.js'
import { clientMessage, serverMessage } from '../../../shared/protocol/messages.js'

// Values at and across every bound the schema sets, and of every wrong type.
const edgeNumbers = [
  -1,
  -0,
  0,
  1e-7,
  0.5,
  1,
  2,
  1.5,
  7,
  L.minWeight,
  L.minWeight / 2,
  L.maxWeight,
  L.maxWeight * 1.5,
  L.maxPriority,
  L.maxPriority + 1,
  -L.maxPriority,
  -L.maxPriority - 1,
  3_600_000,
  3_600_001,
  L.maxQuantity,
  L.maxQuantity * 1.01,
  L.maxQuantity + 0.5,
  Number.MAX_SAFE_INTEGER,
  Number.MAX_SAFE_INTEGER * 4,
  1e300,
  -1e300,
]
const anyNumber = fc.oneof(
  fc.constantFrom(...edgeNumbers),
  fc.integer({ min: -5, max: 1000 }),
  fc.double({ noNaN: true, noDefaultInfinity: true }),
)
const edgeStrings = [
  '',
  'r',
  'r0',
  'api/users',
  'é',
  '😀',
  ' ',
  '\u0000',
  'a\u001f',
  '\u007f',
  'x\u009f',
  'x\u00a0',
  'r'.repeat(L.maxIdLength),
  'r'.repeat(L.maxIdLength + 1),
  // A lease proof's mac: at most 128 characters.
  'm'.repeat(128),
  'm'.repeat(129),
]
const anyString = fc.oneof(fc.constantFrom(...edgeStrings), fc.string({ maxLength: 8 }))
const junk = fc.oneof(
  fc.constant(null),
  fc.boolean(),
  anyString,
  anyNumber,
  fc.constant([]),
  fc.constant({}),
  fc.constant(['r']),
)
/** Mostly a valid value, now and then one near a bound or of the wrong type. */
const maybe = <T>(good: fc.Arbitrary<T>): fc.Arbitrary<unknown> =>
  fc.oneof({ weight: 12, arbitrary: good }, { weight: 1, arbitrary: junk })
const extraKey = fc.constantFrom('extra', '__proto__', 'constructor', 'Type', 'toString')
const count = fc.nat(1000)
const amount = fc.double({ min: 0, max: 1e6, noNaN: true })
const id = fc.constantFrom('r0', 'api/users', 'é')

const usage = fc.record(
  {
    windowMs: maybe(fc.integer({ min: 1, max: 3_600_000 })),
    admitted: maybe(amount),
    refused: maybe(amount),
    admittedCalls: maybe(count),
    refusedCalls: maybe(count),
    waiting: maybe(count),
    inFlight: maybe(amount),
    peakInFlight: maybe(amount),
  },
  {
    requiredKeys: ['windowMs', 'admitted', 'refused', 'admittedCalls', 'refusedCalls', 'waiting'],
  },
)
const entry = fc.record(
  {
    resource: maybe(id),
    wants: maybe(amount),
    weight: maybe(fc.double({ min: 0.01, max: 100, noNaN: true })),
    priority: maybe(fc.integer({ min: -3, max: 3 })),
    usage: maybe(usage),
  },
  { requiredKeys: ['resource', 'wants'] },
)
const withExtra = (arb: fc.Arbitrary<Record<string, unknown>>): fc.Arbitrary<unknown> =>
  fc
    .tuple(arb, fc.option(extraKey, { freq: 8 }), junk)
    .map(([o, key, value]) => (key === null ? o : { ...o, [key]: value }))
const demand = withExtra(
  fc.record(
    {
      type: fc.constantFrom('demand', 'demand', 'ack', 'hello', 'release', 'Demand'),
      resources: maybe(
        fc.array(withExtra(entry as fc.Arbitrary<Record<string, unknown>>), { maxLength: 4 }),
      ),
      early: maybe(fc.boolean()),
      n: maybe(fc.oneof(fc.integer({ min: -2, max: 2 ** 40 }), fc.double())),
      at: maybe(fc.oneof(fc.double({ min: -1, max: 2 ** 54 }), fc.double(), fc.constant('1'))),
    },
    { requiredKeys: ['type'] },
  ),
)
const ack = withExtra(
  fc.record(
    {
      type: fc.constantFrom('ack', 'ack', 'demand'),
      seq: maybe(fc.integer({ min: 1, max: 2 ** 40 })),
      resources: maybe(fc.array(maybe(id), { maxLength: 3 })),
    },
    { requiredKeys: ['type'] },
  ),
)
const decide = withExtra(
  fc.record(
    {
      type: fc.constantFrom('decide', 'decide', 'decided', 'demand'),
      asks: maybe(
        fc.array(
          fc.oneof(
            { weight: 8, arbitrary: fc.tuple(maybe(count), maybe(id), maybe(amount)) },
            { weight: 1, arbitrary: fc.tuple(count, id, amount, junk) },
            { weight: 1, arbitrary: fc.array(maybe(count), { maxLength: 4 }) },
            { weight: 1, arbitrary: junk },
          ),
          { maxLength: 4 },
        ),
      ),
    },
    { requiredKeys: ['type'] },
  ),
)
const decided = withExtra(
  fc.record(
    {
      type: fc.constantFrom('decided', 'decided', 'decide', 'lease'),
      answers: maybe(
        fc.array(
          fc.oneof(
            fc.tuple(maybe(count), maybe(fc.constantFrom(0, 1)), maybe(fc.integer({ min: -2 }))),
            fc.tuple(
              maybe(count),
              maybe(fc.constantFrom(0, 1)),
              maybe(fc.integer({ min: -2 })),
              maybe(fc.integer({ min: -5, max: 5 })),
            ),
            fc.array(maybe(count), { maxLength: 5 }),
            fc.tuple(count, fc.constant(1), fc.constant(0), fc.constant(3), junk),
          ),
          { maxLength: 4 },
        ),
      ),
    },
    { requiredKeys: ['type'] },
  ),
)
// Messages as the client library sends them: always valid.
const sentDemand = fc
  .array(
    fc.record(
      {
        resource: fc.constantFrom('r0', 'api/users', 'é'),
        wants: fc.double({ min: 0, max: 1e6, noNaN: true }),
        weight: fc.double({ min: 0.01, max: 100, noNaN: true }),
        priority: fc.integer({ min: -3, max: 3 }),
        usage: fc.record(
          {
            windowMs: fc.integer({ min: 1, max: 60_000 }),
            admitted: fc.double({ min: 0, max: 1e6, noNaN: true }),
            refused: fc.double({ min: 0, max: 1e6, noNaN: true }),
            admittedCalls: fc.nat(1e6),
            refusedCalls: fc.nat(1e6),
            waiting: fc.nat(100),
            inFlight: fc.nat(100),
            peakInFlight: fc.nat(100),
          },
          {
            requiredKeys: [
              'windowMs',
              'admitted',
              'refused',
              'admittedCalls',
              'refusedCalls',
              'waiting',
            ],
          },
        ),
      },
      { requiredKeys: ['resource', 'wants'] },
    ),
    { maxLength: 5 },
  )
  .chain((resources) =>
    fc.record(
      {
        type: fc.constant('demand'),
        resources: fc.constant(resources),
        early: fc.boolean(),
        n: fc.integer({ min: 1, max: 2 ** 40 }),
        at: fc.double({ min: 0, max: 2 ** 40, noNaN: true }),
      },
      { requiredKeys: ['type', 'resources'] },
    ),
  )
const sentAck = fc.record(
  {
    type: fc.constant('ack'),
    seq: fc.integer({ min: 1, max: 2 ** 40 }),
    resources: fc.array(fc.constantFrom('r0', 'api/users'), { minLength: 1, maxLength: 3 }),
  },
  { requiredKeys: ['type', 'seq'] },
)

const sentDecide = fc.record({
  type: fc.constant('decide'),
  asks: fc.array(
    fc.tuple(
      fc.nat(2 ** 40),
      fc.constantFrom('r0', 'api/users', 'keys/é'),
      fc.double({ min: 0, max: 1e6, noNaN: true }),
    ),
    { minLength: 1, maxLength: 4 },
  ),
})
// And as the coordinator sends its answers.
const sentDecided = fc.record({
  type: fc.constant('decided'),
  answers: fc.array(
    fc.oneof(
      fc.tuple(fc.nat(2 ** 40), fc.constantFrom(0, 1), fc.integer({ min: -1, max: 86_400_000 })),
      fc.tuple(
        fc.nat(2 ** 40),
        fc.constant(1),
        fc.constant(0),
        fc.integer({ min: -1, max: 1_000_000 }),
      ),
    ),
    { maxLength: 4 },
  ),
})

const edgeValue = fc.oneof(
  { weight: 4, arbitrary: fc.constantFrom(...edgeNumbers) },
  { weight: 2, arbitrary: fc.constantFrom(...edgeStrings) },
  { weight: 1, arbitrary: junk },
)

// Lease batches: the common shape (the hot path's), and now and then a shape that is zod's
// (a quota's window, a handover, a plan), in hostile and in sent forms.
const limits = fc.record({ capacity: amount, burst: amount })
const proofWith = (mac: fc.Arbitrary<string>) =>
  fc.record({
    capacity: amount,
    fallback: amount,
    untilMs: fc.nat(2 ** 45),
    fallbackUntilMs: fc.nat(2 ** 45),
    issuedMs: fc.nat(2 ** 45),
    gen: fc.nat(1000),
    mac,
  })
const proof = proofWith(
  fc.oneof(fc.string({ minLength: 1, maxLength: 64 }), fc.constant('m'.repeat(128))),
)
// A mac past its bound, or empty: zod's to refuse.
const badProof = proofWith(fc.constantFrom('m'.repeat(129), ''))
const grantOf = (
  value: <T>(a: fc.Arbitrary<T>) => fc.Arbitrary<unknown>,
  proofs: fc.Arbitrary<unknown> = proof,
) =>
  fc.record(
    {
      resource: value(fc.constantFrom('r0', 'api/users', 'key/é', 'key/*')),
      kind: value(fc.constantFrom('rate', 'concurrency', 'quota')),
      capacity: value(amount),
      burst: value(amount),
      ttlMs: value(fc.nat(60_000)),
      refreshMs: value(fc.integer({ min: 1, max: 60_000 })),
      safeCapacity: value(amount),
      safeHoldMs: value(fc.nat(60_000)),
      proof: value(proofs),
      limit: value(limits),
      full: value(fc.constant(true)),
      fill: value(amount),
      fillWhole: value(fc.constant(true)),
      handOn: value(fc.constant(true)),
      rising: value(fc.constant(true)),
      toDefault: value(fc.constant(true)),
      family: value(
        fc.oneof(
          {
            weight: 4,
            arbitrary: fc.record({
              kind: fc.constantFrom('rate', 'quota'),
              capacity: amount,
              burst: amount,
            }),
          },
          {
            weight: 1,
            arbitrary: fc.record({
              kind: fc.constant('rate'),
              capacity: amount,
              burst: amount,
              plan: fc.constant({ vip: { capacity: 5, burst: 5 } }),
            }),
          },
        ),
      ),
      window: value(
        fc.record({
          index: fc.nat(100),
          endsInMs: fc.nat(60_000),
          quota: amount,
          lengthMs: fc.integer({ min: 1, max: 60_000 }),
        }),
      ),
      handed: value(
        fc.record({
          level: fc.double({ min: 0, max: 1, noNaN: true }),
          keys: fc.constant([['k1', 2]]),
          id: fc.constant('h1'),
        }),
      ),
    },
    {
      requiredKeys: [
        'resource',
        'kind',
        'capacity',
        'burst',
        'ttlMs',
        'refreshMs',
        'safeCapacity',
        'safeHoldMs',
      ],
    },
  )
const leaseOf = (grant: fc.Arbitrary<unknown>) =>
  fc.record(
    {
      type: fc.constant('lease'),
      seq: fc.integer({ min: 1, max: 2 ** 40 }),
      leases: fc.array(grant, { maxLength: 4 }),
      at: fc.nat(2 ** 45),
    },
    { requiredKeys: ['type', 'seq', 'leases'] },
  )
/** A grant of the hot path's shape with every field it takes present: one change to it is one bound. */
const fullHotGrant = fc.record({
  resource: fc.constantFrom('r0', 'key/é', 'key/*'),
  kind: fc.constantFrom('rate', 'concurrency', 'quota'),
  capacity: amount,
  burst: amount,
  ttlMs: fc.nat(60_000),
  refreshMs: fc.integer({ min: 1, max: 60_000 }),
  safeCapacity: amount,
  safeHoldMs: fc.nat(60_000),
  proof,
  limit: limits,
  full: fc.constant(true),
  fill: amount,
  fillWhole: fc.constant(true),
  handOn: fc.constant(true),
  rising: fc.constant(true),
  toDefault: fc.constant(true),
  family: fc.record({ kind: fc.constantFrom('rate', 'quota'), capacity: amount, burst: amount }),
})
const fullHotLease = fc.record({
  type: fc.constant('lease'),
  seq: fc.integer({ min: 1, max: 2 ** 40 }),
  leases: fc.tuple(fullHotGrant),
  at: fc.nat(2 ** 45),
})
const sentLease = leaseOf(grantOf((a) => a))
/** As sent, but now and then a field at or across a bound, or a proof's mac past its bound or empty. */
const leaseNear = leaseOf(
  grantOf(
    (a) => fc.oneof({ weight: 10, arbitrary: a }, { weight: 1, arbitrary: edgeValue }),
    fc.oneof(proof, badProof),
  ),
)
const lease = withExtra(
  fc.record(
    {
      type: fc.constantFrom('lease', 'lease', 'decided', 'welcome'),
      seq: maybe(fc.integer({ min: -1, max: 2 ** 40 })),
      leases: maybe(
        fc.array(
          withExtra(
            grantOf(maybe, fc.oneof(proof, badProof)) as fc.Arbitrary<Record<string, unknown>>,
          ),
          { minLength: 1, maxLength: 3 },
        ),
      ),
      at: maybe(fc.oneof(fc.nat(2 ** 45), fc.double())),
    },
    { requiredKeys: ['type', 'seq', 'leases'] },
  ),
)
/** Whether zod's decoded message is a lease batch of the shape the hot path takes. */
const commonLease = (m: { type: string }): boolean =>
  m.type === 'lease' &&
  (m as unknown as { leases: Record<string, unknown>[] }).leases.every(
    (g) =>
      g.window === undefined &&
      g.handed === undefined &&
      g.inherit === undefined &&
      (g.family === undefined || (g.family as Record<string, unknown>).plan === undefined),
  )

/** Every place in a JSON value: the path to it and its parent. */
function places(value: unknown, path: (string | number)[] = []): (string | number)[][] {
  const out: (string | number)[][] = path.length === 0 ? [] : [path]
  if (typeof value === 'object' && value !== null)
    for (const [k, v] of Object.entries(value))
      out.push(...places(v, [...path, Array.isArray(value) ? Number(k) : k]))
  return out
}

/**
 * A valid message with one change: a value replaced by one at or across a
 * bound (or of another type), a key removed, or a key added.
 */
const nearlyValidOf = (sent: fc.Arbitrary<unknown>): fc.Arbitrary<unknown> =>
  fc
    .tuple(sent, fc.nat(), fc.constantFrom('set', 'delete', 'add'), edgeValue, extraKey)
    .map(([message, pick, change, value, key]) => {
      const copy = JSON.parse(JSON.stringify(message)) as Record<string, unknown>
      const all = places(copy)
      const path = all[pick % all.length]!
      let parent: unknown = copy
      for (const step of path.slice(0, -1)) parent = (parent as Record<string, unknown>)[step]
      const target = parent as Record<string | number, unknown>
      const last = path.at(-1)!
      if (change === 'set') target[last] = value
      else if (change === 'delete' && !Array.isArray(target)) delete target[last]
      // An own key even for __proto__ (an assignment would set the prototype instead).
      else if (!Array.isArray(target))
        Object.defineProperty(target, key, { value, enumerable: true, writable: true })
      return copy
    })
const nearlyValid = nearlyValidOf(fc.oneof(sentDemand, sentAck, sentDecide))

/** What JSON.parse can give: the generated value through JSON and back, as a frame would be. */
const framesOf = (...arbs: fc.Arbitrary<unknown>[]): fc.Arbitrary<unknown> =>
  fc.oneof(...arbs).map((v) => JSON.parse(JSON.stringify(v)) as unknown)
const frame = framesOf(
  demand,
  ack,
  decide,
  junk,
  sentDemand,
  sentAck,
  sentDecide,
  nearlyValid,
  nearlyValid,
)
const serverFrame = framesOf(
  decided,
  junk,
  sentDecided,
  nearlyValidOf(sentDecided),
  nearlyValidOf(sentDecided),
  lease,
  sentLease,
  nearlyValidOf(sentLease),
)
const leaseFrame = framesOf(
  lease,
  sentLease,
  leaseNear,
  nearlyValidOf(sentLease),
  nearlyValidOf(fullHotLease),
  nearlyValidOf(fullHotLease),
  nearlyValidOf(fullHotLease),
)

describe('the hot-path check of demand, ack and decide frames', () => {
  it('accepts only what zod accepts, as zod decodes it', () => {
    let accepted = 0
    fc.assert(
      fc.property(frame, (json) => {
        const hot = acceptHotMessage(json)
        if (hot === undefined) return
        accepted++
        const parsed = clientMessage.safeParse(json)
        expect(parsed.success).toBe(true)
        expect(hot).toStrictEqual(parsed.data)
      }),
      { numRuns: 20_000 },
    )
    // The generator reaches both sides: some frames pass, most hostile ones do not.
    expect(accepted).toBeGreaterThan(2000)
  })

  it('accepts every demand, ack and decide zod accepts (so only hostile frames pay for zod)', () => {
    fc.assert(
      fc.property(frame, (json) => {
        const parsed = clientMessage.safeParse(json)
        const hotType =
          parsed.success &&
          (parsed.data.type === 'demand' ||
            parsed.data.type === 'ack' ||
            parsed.data.type === 'decide')
        expect(acceptHotMessage(json) !== undefined).toBe(hotType)
      }),
      { numRuns: 20_000 },
    )
  })

  it('accepts what the client library sends', () => {
    fc.assert(
      fc.property(fc.oneof(sentDemand, sentAck, sentDecide), (message) => {
        const json = JSON.parse(JSON.stringify(message)) as unknown
        expect(acceptHotMessage(json)).toBeDefined()
        const decoded = decodeClientMessage(JSON.stringify(message))
        expect(decoded).toStrictEqual({ ok: true, message: clientMessage.parse(json) })
      }),
    )
  })

  it('leaves every refusal, and its detail, to zod', () => {
    const frameText = '{"type":"demand","resources":[{"resource":"r\\u0000","wants":1}]}'
    expect(acceptHotMessage(JSON.parse(frameText))).toBeUndefined()
    const decoded = decodeClientMessage(frameText)
    expect(decoded.ok).toBe(false)
    if (!decoded.ok) expect(decoded.detail).toMatch(/printable/)
    expect(acceptHotMessage(JSON.parse('{"type":"ack","seq":1,"__proto__":{}}'))).toBeUndefined()
    expect(decodeClientMessage('{"type":"ack","seq":1,"__proto__":{}}').ok).toBe(false)
  })
})

describe('the hot-path check of decided and lease frames', () => {
  /**
   * Holds the server check to zod over `frames`: it takes a frame exactly when zod decodes it
   * to a message `hotShape` says it should take, and as zod decodes it. What it took, by type.
   */
  const heldToZod = (
    frames: fc.Arbitrary<unknown>,
    hotShape: (m: { type: string }) => boolean,
  ): { accepted: number; leases: number; refused: number } => {
    const seen = { accepted: 0, leases: 0, refused: 0 }
    fc.assert(
      fc.property(frames, (json) => {
        const hot = acceptHotServerMessage(json)
        const parsed = serverMessage.safeParse(json)
        expect(hot !== undefined).toBe(parsed.success && hotShape(parsed.data))
        if (hot === undefined) return void seen.refused++
        seen.accepted++
        if (hot.type === 'lease') seen.leases++
        expect(hot).toStrictEqual(parsed.data)
      }),
      { numRuns: 30_000 },
    )
    return seen
  }

  it('accepts only what zod accepts, as zod decodes it, and every decided and common lease zod accepts', () => {
    const seen = heldToZod(serverFrame, (m) => m.type === 'decided' || commonLease(m))
    expect(seen.accepted).toBeGreaterThan(2000)
    expect(seen.leases).toBeGreaterThan(500)
    expect(seen.refused).toBeGreaterThan(2000)
  })

  it('accepts a lease batch only as zod decodes it, every field at and across its bounds', () => {
    const seen = heldToZod(leaseFrame, commonLease)
    expect(seen.accepted).toBeGreaterThan(3000)
    expect(seen.refused).toBeGreaterThan(3000)
  })

  it('takes a lease batch the coordinator sends, and leaves a window, a handover or a plan to zod', () => {
    fc.assert(
      fc.property(sentLease, (message) => {
        const decoded = decodeServerMessage(JSON.stringify(message))
        expect(decoded).toStrictEqual({ ok: true, message: serverMessage.parse(message) })
        const json = JSON.parse(JSON.stringify(message)) as { type: string }
        expect(acceptHotServerMessage(json) !== undefined).toBe(commonLease(json))
      }),
    )
    const grant =
      '"resource":"r0","kind":"rate","capacity":1,"burst":1,"ttlMs":1000,"refreshMs":100,"safeCapacity":0,"safeHoldMs":0'
    expect(
      acceptHotServerMessage(JSON.parse(`{"type":"lease","seq":1,"leases":[{${grant}}]}`)),
    ).toBeDefined()
    // A resource id with a control character, a seq of 0: zod's to refuse, with its detail.
    for (const text of [
      `{"type":"lease","seq":1,"leases":[{${grant.replace('"r0"', '"r\\u0000"')}}]}`,
      `{"type":"lease","seq":0,"leases":[{${grant}}]}`,
    ]) {
      expect(acceptHotServerMessage(JSON.parse(text))).toBeUndefined()
      expect(decodeServerMessage(text).ok).toBe(false)
    }
  })

  it('accepts what the coordinator sends, and leaves a refusal to zod', () => {
    fc.assert(
      fc.property(sentDecided, (message) => {
        const decoded = decodeServerMessage(JSON.stringify(message))
        expect(decoded).toStrictEqual({ ok: true, message: serverMessage.parse(message) })
        expect(acceptHotServerMessage(JSON.parse(JSON.stringify(message)))).toBeDefined()
      }),
    )
    // A window on a refusal, and an admitted flag of 2: zod's to refuse, with its detail.
    for (const text of [
      '{"type":"decided","answers":[[1,0,0,7]]}',
      '{"type":"decided","answers":[[1,2,0]]}',
    ]) {
      expect(acceptHotServerMessage(JSON.parse(text))).toBeUndefined()
      expect(decodeServerMessage(text).ok).toBe(false)
    }
  })
})
