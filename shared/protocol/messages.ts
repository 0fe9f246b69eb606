import { z } from 'zod'
import { domainLimits, resourceKinds } from '../domain.js'
import { errorCodes } from '../errors.js'
import { maxKeyLength } from '../keys.js'
import {
  clientIdSchema,
  printableString,
  prioritySchema,
  quantitySchema,
  resourceId,
  weightSchema,
} from './fields.js'

export { resourceId } from './fields.js'

/** Protocol version spoken by this build. */
export const protocolVersion = 1

/** WebSocket path of the coordinator. */
export const connectPath = '/v1/connect'

/** Hard bounds of the protocol itself; coordinators configure tighter ones (docs/protocol.md). */
const L = domainLimits

const quantity = quantitySchema

/**
 * A lease's proof: what the coordinator signed (HMAC-SHA256 under the
 * replicas' holdings key), so a coordinator that starts later can verify a
 * holding instead of trusting it. `untilMs` and `fallbackUntilMs` are the
 * signing coordinator's wall-clock times (ms since the epoch): the one place
 * the protocol carries timestamps, read only by coordinators, whose clocks
 * must agree within graceMs. Clients echo it untouched.
 */
export const leaseProof = z.strictObject({
  capacity: quantity,
  fallback: quantity,
  untilMs: z.number().int().min(0),
  fallbackUntilMs: z.number().int().min(0),
  /**
   * The generation: when the lease was signed (wall ms) and its batch's number at the signing
   * coordinator. Of two proofs, the later one counts first when claims conflict.
   */
  issuedMs: z.number().int().min(0),
  gen: z.number().int().min(0),
  mac: z.string().min(1).max(128),
})
const weight = weightSchema
const priority = prioritySchema

// ---- client → coordinator ----

export const helloMessage = z.strictObject({
  type: z.literal('hello'),
  v: z.number().int(),
  clientId: clientIdSchema,
  token: z.string().max(L.maxTokenLength).optional(),
  /**
   * A random value the process picks once: a hello with the same client id and instance is the
   * same process reconnecting (it keeps its leases); any other takes the id over from a process
   * that may still be running (whose leases keep counting until they lapse).
   */
  instance: z
    .string()
    .min(8)
    .max(64)
    .regex(/^[A-Za-z0-9_-]+$/)
    .optional(),
  /**
   * What the client may enforce now (its lease, or its fallback while the hold lasts) and, for
   * concurrency, the slots in flight, so a coordinator in learning mode can rebuild its state.
   */
  /** Who the client is, for operators: default host name and pid. */
  name: printableString(128).optional(),
  /** The client library and its version, e.g. `sluice/0.1.0`. */
  library: printableString(64).optional(),
  /**
   * The ledger (the welcome's `ledger`) of the coordinator that leased what `holdings` claim:
   * a coordinator that resumed from another ledger, or a new one, then knows its own cannot
   * hold everything that is out.
   */
  ledger: z.string().min(1).max(64).optional(),
  holdings: z
    .array(
      z.strictObject({
        resource: resourceId,
        capacity: quantity,
        inFlight: quantity.optional(),
        proof: leaseProof.optional(),
      }),
    )
    .max(L.maxEntries)
    .optional(),
})

const count = z.number().int().min(0).max(L.maxQuantity)

/**
 * What the client's limiter did over `windowMs` (since its previous report):
 * tokens (rate) or slots (concurrency) admitted and refused, and the calls;
 * callers waiting now; for concurrency, slots in flight now and at the peak.
 * Read by operators only: the allocation never uses it.
 */
export const usageEntry = z.strictObject({
  windowMs: z.number().int().min(1).max(3_600_000),
  admitted: quantity,
  refused: quantity,
  admittedCalls: count,
  refusedCalls: count,
  waiting: count,
  inFlight: quantity.optional(),
  peakInFlight: quantity.optional(),
})

/** A quota window as the wire names it: its number, not its time. */
const windowIndex = z.number().int().min(-1e12).max(1e12)

export const demandEntry = z
  .strictObject({
    resource: resourceId,
    /** Tokens/s or slots wanted now (quota: units/s asked for). */
    wants: quantity,
    /** Quota: units used in `window` so far (cumulative). */
    used: quantity.optional(),
    /**
     * A keyed quota's key: of `used`, the units other processes spent and handed on with a
     * share (counted here as spent, never admitted here): a key reset gives back only the rest.
     */
    charged: quantity.optional(),
    window: windowIndex.optional(),
    weight: weight.optional(),
    priority: priority.optional(),
    usage: usageEntry.optional(),
    /**
     * A keyed family's entry: this process asks the coordinator what its part cannot decide
     * (remote decisions). In a crowded family its default share is then held by the
     * coordinator's own part, which decides for it.
     */
    remote: z.boolean().optional(),
    /**
     * A keyed family's key leased here on its own without this process ever having asked for it
     * (seeded as it went hot elsewhere): said at once, asking for nothing. The coordinator need
     * not keep the seed for this process's report, and where it falls to 0 for the one process
     * that asks, what it held goes to that rise (server/pool/lease-out.ts, `handOn`).
     */
    unasked: z.literal(true).optional(),
    /**
     * A keyed family's key: checks here wait for its own lease (`decide`, `check`, the HTTP
     * edge, whose part here cannot decide them). A report that makes the key hot with it asks the
     * other holders to say at once whether they ask for the key (`reportNow`), so it can move.
     */
    waits: z.literal(true).optional(),
  })
  .refine((e) => (e.used === undefined) === (e.window === undefined), {
    message: 'used and window come together (what was used of which window), or neither',
    path: ['used'],
  })

export const demandMessage = z.strictObject({
  type: z.literal('demand'),
  resources: z.array(demandEntry).max(L.maxEntries),
  /** Sent ahead of the refresh period because the client is throttled well below its demand. */
  early: z.boolean().optional(),
  /**
   * This report's number (a client counts its reports from 1): a quota lease's `window.edge`
   * is measured from the moment the coordinator handled it, so the client, which knows when it
   * sent it, knows the window's end in its own clock to within the report's one-way delay.
   */
  n: z.number().int().min(1).optional(),
  /**
   * When the client sent this report, ms on its own monotonic clock (any origin; with `n`).
   * Of its recent reports, the coordinator measures a quota window's end from the one that
   * reached it soonest (the least of handled-at less sent-at: the least one-way delay, the
   * clocks' offset being the same for all), not always the newest: the end a client places is
   * that much nearer the true one.
   */
  at: z.number().min(0).max(Number.MAX_SAFE_INTEGER).optional(),
})

/** A share of a whole (0..1). */
const shareFraction = z.number().min(0).max(1)

/** A key of a family and units of it: what a released share spent, or what a lease hands on. */
const spentKeys = z
  .array(z.tuple([printableString(maxKeyLength).min(1), quantity]))
  .max(L.maxSpentKeys)

export const ackMessage = z.strictObject({
  type: z.literal('ack'),
  /** A lease batch sent on this connection. */
  seq: z.number().int().min(1),
  /**
   * The resources of batch `seq` whose lease the client has put in force; absent: all of the
   * batch. An ack covers exactly these leases (and so replaces the older leases of these
   * resources), never another resource or another batch's lease.
   */
  resources: z.array(resourceId).min(1).max(L.maxEntries).optional(),
  /**
   * Named rate resources whose lease in this batch fell: the tokens the client's bucket gave
   * up as it fell (what the slices that fell held above its new burst), `[resource, tokens]`.
   * The coordinator may hand them to a rise it grants as it handles this ack (the rise's
   * `fill`), never more than the fall's share of the burst; the client holds them no more.
   */
  gave: z
    .array(z.tuple([resourceId, quantity]))
    .min(1)
    .max(L.maxEntries)
    .optional(),
  /**
   * Rate families whose default share fell in this batch by a lease that said `handOn` (a
   * process joining waits for its first share): what the part that fell held, given up, as a
   * release's `held` says it (of every key not named, `level` of its burst; of each key named,
   * its tokens). The coordinator hands it to the joiner's first share (server/pool/fall-gifts.ts),
   * never more than the fall's share (and the fall's part of a gift this share took); the client
   * holds it no more. `goesAtShare`: what was given goes at this share of each key's rate, as it
   * went here (at least the share that fell: the coordinator takes the faster). Only in a whole
   * batch's ack.
   */
  held: z
    .array(
      z.strictObject({
        resource: resourceId,
        level: shareFraction,
        keys: spentKeys,
        goesAtShare: z.number().positive().max(L.maxQuantity).optional(),
      }),
    )
    .min(1)
    .max(L.maxEntries)
    .optional(),
})

export const releaseMessage = z.strictObject({
  type: z.literal('release'),
  resources: z.array(resourceId).max(L.maxEntries),
  /**
   * Quotas released in their window, and what was spent of each: a named quota's `used` (the
   * rest of its block comes back at once), or a keyed quota family's `keys`: every key this
   * process spent of by its default share in `window`, and how much, each key once (the
   * coordinator may then hand the share on, with these keys counted spent). Absent, or naming
   * another window, what was leased stays spent to the window's end.
   */
  spent: z
    .array(
      z.strictObject({
        resource: resourceId,
        window: windowIndex,
        used: quantity.optional(),
        /** A keyed quota's key: of `used`, the units handed on to this client (demandEntry). */
        charged: quantity.optional(),
        keys: spentKeys.optional(),
      }),
    )
    .max(L.maxEntries)
    .optional(),
  /**
   * Rate families released whole, and what the share still held (server/pool/handover.ts): of
   * every key not named, `level` of the key's burst (a share of it, at most the share
   * released); of each key named, its tokens. The coordinator may hand the share on with
   * them: the process that takes it starts those keys from them, not empty.
   */
  held: z
    .array(z.strictObject({ resource: resourceId, level: shareFraction, keys: spentKeys }))
    .max(L.maxEntries)
    .optional(),
})

/**
 * Remote decisions: checks of keys this process could not decide by its own share (an empty
 * bucket, a share below one request, a key moving), asked of the coordinator, which decides
 * each against what it holds of the key itself, as one central limiter would, and answers in
 * a `decided`. Each ask is `[n, resource, cost]`: `n` numbers it on this connection (the answer
 * names it), `resource` is a keyed family's key (`<prefix>/<key>`), `cost` its units.
 */
export const decideMessage = z.strictObject({
  type: z.literal('decide'),
  asks: z
    .array(z.tuple([z.number().int().min(0), resourceId, quantity]))
    .min(1)
    .max(L.maxEntries),
})

export const clientMessage = z.discriminatedUnion('type', [
  helloMessage,
  demandMessage,
  ackMessage,
  releaseMessage,
  decideMessage,
])

// ---- coordinator → client ----

export const leaseGrant = z.strictObject({
  resource: resourceId,
  kind: z.enum(resourceKinds),
  /** Tokens/s (rate) or slots (concurrency) this client may use. */
  capacity: quantity,
  /** Rate: bucket size in tokens. Concurrency: equal to capacity. */
  burst: quantity,
  /** Life of the lease from receipt. */
  ttlMs: z.number().int().min(0),
  /** How often to report demand. */
  refreshMs: z.number().int().min(1),
  /** What to use if the lease lapses unrenewed, in `safe` failure mode (never above `capacity`). */
  safeCapacity: quantity,
  /** How long `safe` mode may use safeCapacity after the lease lapses; then 0 until a lease comes. */
  safeHoldMs: z.number().int().min(0),
  /** Present when the coordinator has a holdings key: echo it in a hello's holdings. */
  proof: leaseProof.optional(),
  /**
   * A keyed family's lease (resource `<prefix>/*`): `capacity` is this client's default share
   * of every key (a fraction of 1), and this says what a key is: its kind, capacity and burst,
   * and the plan's keys that differ. A key leased on its own (`<prefix>/<key>`) is enforced
   * by its own lease from then on, never by the default share again.
   */
  /**
   * Quota: the window this lease's budget belongs to, and how long the client may spend it,
   * from receipt (ends before the window does by graceMs: no unit spills into the next).
   * `capacity` is then the budget of the window in all, what was used included.
   */
  /**
   * Keyed quota family: a share another process released in this window comes with this lease
   * (`capacity` includes it), and with it what that process spent of each key: the client
   * counts those units spent of the keys in `window`, as if it had spent them itself.
   */
  inherit: z
    .strictObject({ window: windowIndex, keys: spentKeys, id: printableString(64).min(1) })
    .optional(),
  /**
   * Rate family: a share another process released whole comes with this lease (`capacity`
   * includes it), and with it what that share still held (the release's `held`): the client
   * adds to each key's bucket `level` of its burst, or the tokens named for it (never above
   * the bucket's burst). Taken once per `id`, however often a lease says it.
   */
  handed: z
    .strictObject({
      level: shareFraction,
      keys: spentKeys,
      id: printableString(64).min(1),
      /**
       * A fall's gift to a joiner's first share (server/pool/fall-gifts.ts): the tokens are held
       * above each bucket's burst, spent first, going at this share of each key's rate until
       * none is left, as the faller's excess would have gone. Absent: a release's, added to the
       * buckets.
       */
      goesAtShare: z.number().positive().max(L.maxQuantity).optional(),
    })
    .optional(),
  window: z
    .strictObject({
      index: windowIndex,
      endsInMs: z.number().int().min(0),
      /** The whole quota of a window, every client's together (what a caller is held to). */
      quota: quantity,
      /** How long a window lasts, ms (a calendar month: this one). */
      lengthMs: z.number().int().min(1),
      /**
       * A keyed quota's key leased on its own: what the key may still admit at other
       * processes as this lease leaves (their budgets less what they reported used, and what
       * no budget holds yet). For a refusal's Retry-After only: a key whose budget here is
       * spent while some is left elsewhere comes back within a round, not at the window's end.
       */
      elsewhere: quantity.optional(),
      /**
       * `[n, ms]`: the window ends `ms` after the coordinator handled the client's report
       * number `n` (its `n`), at most: the client spends the window's budget until `ms` after
       * it sent that report (never past the window's end: it was sent before it was handled),
       * rather than until `endsInMs` after this lease came. Sent only to a client that numbers
       * its reports.
       */
      edge: z.tuple([z.number().int().min(1), z.number().int().min(0)]).optional(),
      /**
       * A quota's next window, sent ahead of this one's end (server/pool/ahead.ts): its
       * budget for this client (`capacity`: a named quota's whole units; a keyed quota family's
       * default share of every key, a fraction, spent of every key not leased on its own:
       * client/keyed/quota-keys.ts), spent from `startsInMs` after this lease came (no sooner: the window opens by then on any clock the protocol allows) until
       * `endsInMs` after it came, or `edge[1]` after report `edge[0]` was sent, as `edge` above.
       * The coordinator counts it against that window from the moment it is sent.
       */
      next: z
        .strictObject({
          index: windowIndex,
          capacity: quantity,
          startsInMs: z.number().int().min(0),
          endsInMs: z.number().int().min(0),
          edge: z.tuple([z.number().int().min(1), z.number().int().min(0)]).optional(),
        })
        .optional(),
    })
    .optional(),
  /**
   * Rate and concurrency: the resource's whole capacity and burst, every client's together
   * (what a caller is held to, for the HTTP edge's RateLimit-Policy); `capacity` above is
   * this client's share of it.
   */
  limit: z.strictObject({ capacity: quantity, burst: quantity }).optional(),
  /**
   * Rate: the bucket may start full (its `burst`) rather than empty. Sent only when nobody
   * could enforce any of the resource for burst ÷ capacity seconds before this lease (so no
   * token of the burst can have been spent by another process), once per such quiet spell;
   * and once on a rate key's lease after the key is reset (server/pool/reset.ts): the bucket is
   * filled to this lease's burst, whatever it held.
   */
  full: z.literal(true).optional(),
  /**
   * Rate, a keyed family's own resource: each key's bucket starts with this much of the key's
   * burst (as `capacity` is of its rate: a share, at most `capacity`) rather than empty, and
   * earns the rest. A first share on a family, when part of the burst is free but not all of
   * this share (server/pool/lease-out.ts, firstShareFill). On a rate key's own lease, tokens:
   * a key's share handed on from a process closed cleanly, what it earned since the release
   * (server/pool/held-handover.ts); taken only by a bucket that held nothing of the key. On a
   * named rate resource's rise, or a rate key's own lease rising, tokens other holders gave up
   * as their shares fell (an ack's `gave`), never more than the burst it gains: the rise's fresh
   * part starts empty and holds them as an excess going at the rate gained (a rise may be paid
   * for by falls that kept their excess going too), unless `fillWhole`.
   */
  fill: quantity.optional(),
  /**
   * With `fill` on a rate key's own lease: the rise is the whole of what the fill stands for (a
   * share handed on whole from a process closed cleanly, nothing else paid for it), so its
   * fresh part holds the tokens, as the leaver's bucket would have.
   */
  fillWhole: z.literal(true).optional(),
  /**
   * A rate or concurrency key's seed (its first own lease, as it went hot elsewhere), where the
   * process that made it hot has checks waiting for it: a client that never asked for the key
   * says so at once (an early report naming it, `unasked`), so the coordinator need not keep the
   * seed until its next report.
   */
  reportNow: z.literal(true).optional(),
  /**
   * Rate, a keyed family's own resource, a fall of the default share: a process joining waits
   * for its first share. The client gives up what the part that fell holds (each key's bucket
   * that is one part drops what is above its new burst; a key never seen starts from the new
   * share) and says it in this batch's ack (`held`), for the joiner to start from.
   */
  handOn: z.literal(true).optional(),
  /**
   * A keyed family's share (rate, concurrency), a lease of 0 below what the coordinator means this client to hold:
   * the rest is granted as other holders acknowledge their falls (a round trip), or in part at a
   * round after a second. The client waits for it (`ready()`, a check its share cannot decide:
   * `risingWaitMs` at most) rather than take 0 for its share. A rate key's own lease, of any
   * capacity, below what the coordinator means this client to hold of the key (or the seed of a
   * key its own report made hot: the key's first round is to come): a check of the key its part
   * cannot decide waits for the key's next lease (docs/protocol.md).
   */
  rising: z.literal(true).optional(),
  /**
   * A key of a keyed family goes back to the default split (nobody asks for it any more): the
   * client drops its own lease of the key, and the family's default share rules it again.
   * The rest of the grant is 0.
   */
  toDefault: z.literal(true).optional(),
  family: z
    .strictObject({
      kind: z.enum(resourceKinds),
      capacity: quantity,
      burst: quantity,
      plan: z
        .record(z.string(), z.strictObject({ capacity: quantity, burst: quantity }))
        .optional(),
    })
    .optional(),
})

export const welcomeMessage = z.strictObject({
  type: z.literal('welcome'),
  v: z.number().int(),
  clientId: z.string(),
  tenant: z.string().optional(),
  /** Time left in learning mode; 0 when not learning. */
  learningMs: z.number().int().min(0),
  /** The identity of the coordinator's ledger, when it keeps one: a later hello names it. */
  ledger: z.string().min(1).max(64).optional(),
  heartbeatMs: z.number().int().min(1),
})

export const leaseMessage = z.strictObject({
  type: z.literal('lease'),
  seq: z.number().int().min(1),
  leases: z.array(leaseGrant),
  /**
   * When the coordinator sent the batch, on its own monotonic clock (whole ms, floored): a
   * client places a next window's start (`window.next.startsInMs`, from this batch's sending)
   * from whichever of its connection's recent batches came soonest (client/coordinator-stamps.ts).
   */
  at: z.number().int().min(0).max(Number.MAX_SAFE_INTEGER).optional(),
})

export const errorMessage = z.strictObject({
  type: z.literal('error'),
  /** A code of the catalogue (docs/errors.md); a code this build does not know fails decoding. */
  code: z.enum(errorCodes),
  message: z.string(),
  resource: z.string().optional(),
  /** Every resource of the frame refused for this code, when more than one (`resource` is the first). */
  resources: z.array(z.string()).max(L.maxEntries).optional(),
})

export const redirectMessage = z.strictObject({
  type: z.literal('redirect'),
  url: z.string(),
})

/**
 * The answers to a `decide`, each `[n, admitted, retryAfterMs | remaining]`: `admitted` 1 when
 * the coordinator took the cost from what it holds of the key, 0 when not. A refusal's third is
 * when asking again may succeed (Infinity is sent as -1: not by waiting); an admission's is what
 * the key has left after it, as the coordinator's part knows it (0 from a coordinator that
 * does not say). A keyed quota's admitted check adds the window its budget was taken from:
 * `[n, 1, remaining, window]`.
 */
export const decidedMessage = z.strictObject({
  type: z.literal('decided'),
  answers: z
    .array(
      z.union([
        z.tuple([
          z.number().int().min(0),
          z.union([z.literal(0), z.literal(1)]),
          z.number().int().min(-1),
        ]),
        // An admitted check of a keyed quota: and the window whose budget it was taken from.
        z.tuple([z.number().int().min(0), z.literal(1), z.number().int().min(-1), windowIndex]),
      ]),
    )
    .max(L.maxEntries),
})

export const serverMessage = z.discriminatedUnion('type', [
  welcomeMessage,
  leaseMessage,
  errorMessage,
  redirectMessage,
  decidedMessage,
])

/** How many entries a message carries: the admission work it asks for (at least 1). */
export function entriesOf(msg: ClientMessage): number {
  switch (msg.type) {
    case 'hello':
      return Math.max(1, msg.holdings?.length ?? 0)
    case 'demand':
    case 'release':
      return Math.max(1, msg.resources.length)
    case 'ack':
      return msg.resources?.length ?? 1
    case 'decide':
      return msg.asks.length
  }
}

export type HelloMessage = z.output<typeof helloMessage>
export type DemandEntry = z.output<typeof demandEntry>
export type Usage = z.output<typeof usageEntry>
export type DemandMessage = z.output<typeof demandMessage>
export type AckMessage = z.output<typeof ackMessage>
export type ReleaseMessage = z.output<typeof releaseMessage>
export type ClientMessage = z.output<typeof clientMessage>
export type DecideMessage = z.output<typeof decideMessage>
export type DecidedMessage = z.output<typeof decidedMessage>
export type LeaseGrant = z.output<typeof leaseGrant>
export type LeaseProof = z.output<typeof leaseProof>
export type WelcomeMessage = z.output<typeof welcomeMessage>
export type LeaseMessage = z.output<typeof leaseMessage>
export type ErrorMessage = z.output<typeof errorMessage>
export type RedirectMessage = z.output<typeof redirectMessage>
export type ServerMessage = z.output<typeof serverMessage>
