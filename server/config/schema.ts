import { z } from 'zod'
import {
  commitmentLifeMs,
  demandEstimators,
  domainLimits,
  failureModes,
  kindTraits,
  clientIdSchema,
  quantitySchema,
  resourceKinds,
  weightSchema,
} from '../../shared/index.js'
import {
  algorithms,
  defaultAlgorithm,
  defaultSurplus,
  surplusPolicies,
} from '../allocation/index.js'
import { isTimeZone, parseDuration } from './window.js'

const quantity = quantitySchema
const weight = weightSchema
const ms = (min: number, max: number): z.ZodNumber => z.number().int().min(min).max(max)

/** Most keys a keyed family's plan may list (the plan travels with every family lease). */
export const maxPlanKeys = 100

/** Per-connection and per-process bounds. Every one has a default; see docs/configuration.md. */
export const limitsSchema = z.strictObject({
  /** Largest WebSocket frame accepted, bytes. */
  maxFrameBytes: z
    .number()
    .int()
    .min(1024)
    .max(16 * 1024 * 1024)
    .default(64 * 1024),
  /** Most resources one client may use at once. */
  maxResourcesPerClient: z.number().int().min(1).max(100_000).default(256),
  /** Most messages one connection may send per second (sustained; bursts of twice that). */
  maxMessagesPerSec: z.number().min(1).max(1_000_000).default(50),
  /**
   * Most entries (resources in reports, acks, releases and holdings) one connection may send
   * per second (sustained; bursts of twice that): the admission work one peer can cause.
   */
  maxEntriesPerSec: z.number().min(1).max(10_000_000).default(5_000),
  /** The same, for all the connections of one tenant together. */
  maxEntriesPerSecPerTenant: z.number().min(1).max(100_000_000).default(50_000),
  /**
   * Remote decisions (`decide` frames, outside maxMessagesPerSec and maxEntriesPerSec): most
   * frames one connection may send per second, a frame counting once per 4 KiB begun, bursts
   * of twice that (past it, closed: a client paces its frames at 500 a second at most).
   */
  maxDecideFramesPerSec: z.number().min(1).max(1_000_000).default(1_000),
  /**
   * Most checks one connection may ask the coordinator to decide per second, bursts of twice
   * that: asks past it are answered refused at once (with when to ask again), up to as many
   * again, then the connection is closed (a flood). They count in maxEntriesPerSecPerTenant
   * too, refused the same way past it.
   */
  maxAsksPerSec: z.number().min(1).max(10_000_000).default(20_000),
  /**
   * Bytes waiting to be sent to one connection before it is closed as a reader that stopped
   * reading (SLUICE_ERR_SESSION_SLOW_READER): what a peer that never reads can make this
   * process hold.
   */
  maxSendBufferBytes: z
    .number()
    .int()
    .min(64 * 1024)
    .max(1024 * 1024 * 1024)
    .default(1024 * 1024),
  /** Most clients connected or holding leases at once. */
  maxClients: z.number().int().min(1).max(10_000_000).default(100_000),
  /** Most distinct resources with clients at once. */
  maxResources: z.number().int().min(1).max(10_000_000).default(100_000),
  /**
   * Most distinct resources the clients of one tenant may use at once. Default: half of
   * maxResources when two or more tenants are configured (so no one tenant can take them all),
   * else maxResources.
   */
  maxResourcesPerTenant: z.number().int().min(1).max(10_000_000).optional(),
  /**
   * Most clients of one tenant connected at once, unless the tenant sets its own maxClients.
   * Default: half of maxClients when two or more tenants are configured, else maxClients.
   */
  maxClientsPerTenant: z.number().int().min(1).max(10_000_000).optional(),
  /** Resources whose history (15 min by the second, 24 h by the minute, ~94 KiB each) is kept. */
  maxHistoryResources: z.number().int().min(0).max(100_000).default(500),
  /** Label sets of the per-resource, per-tenant usage counters (past it: resource="_other"). */
  maxUsageSeries: z.number().int().min(1).max(1_000_000).default(10_000),
  /** Time a new connection has to say hello. */
  helloTimeoutMs: ms(10, 600_000).default(5_000),
  /** Ping period; a peer that misses a whole period is closed. */
  heartbeatMs: ms(10, 3_600_000).default(15_000),
  /** Delay that groups the prompt rounds a burst of joins or reports would cause. */
  roundDebounceMs: ms(0, 60_000).default(20),
  /** Failed authentications allowed per source address and second (sustained); past it, refused unchecked. */
  authFailuresPerSec: z.number().min(0.001).max(10_000).default(1),
  /** Failed authentications a source address may make in a burst. */
  authFailureBurst: z.number().int().min(1).max(10_000).default(10),
})

/** TLS for the HTTP and WebSocket listener; the files are re-read on every reload. */
export const tlsSchema = z.strictObject({
  /** PEM certificate chain of this coordinator. */
  certFile: z.string().min(1),
  /** PEM private key. */
  keyFile: z.string().min(1),
  /** PEM CA bundle that client certificates must chain to (with clientCerts). */
  caFile: z.string().min(1).optional(),
  /** `require`: every connection presents a certificate signed by caFile; `none`: no client certificates. */
  clientCerts: z.enum(['none', 'require']).default('none'),
})

/** The key that signs lease proofs, so a new coordinator can verify the holdings clients claim. */
export const holdingsKeySchema = z.strictObject({
  /** Signs new leases; at least 32 characters. */
  current: z.string().min(32),
  /** Earlier keys, still accepted when verifying (rotation). */
  previous: z.array(z.string().min(32)).max(8).default([]),
})

const wsUrl = z.string().regex(/^wss?:\/\/[^\s/]+/, 'must be a ws:// or wss:// URL')

/** High availability: replicas elect a leader through etcd. Read at start; a reload does not change it. */
export const haSchema = z.strictObject({
  /** etcd client URLs. */
  etcd: z.array(z.string().regex(/^https?:\/\/\S+$/, 'must be an http:// URL')).min(1),
  /** URL clients reach this replica at; default ws://host:port/v1/connect. */
  advertise: wsUrl.optional(),
  /** Election name: replicas with the same name are one coordinator. */
  name: z
    .string()
    .regex(/^[A-Za-z0-9._-]{1,64}$/)
    .default('sluice'),
  /** etcd lease TTL, s: how long a crashed leader blocks a successor. */
  ttlSec: z.number().int().min(2).max(300).default(5),
})

/** Trees: this coordinator leases its capacity from a parent coordinator. Read at start. */
export const parentSchema = z.strictObject({
  /** The parent's WebSocket URL(s), tried in turn. */
  url: z.union([wsUrl, z.array(wsUrl).min(1)]),
  /** Tenant token at the parent, if it has tenants. */
  token: z.string().min(8).optional(),
  /** Client id at the parent; default coordinator:<hostname>:<port>. Must be unique per downstream. */
  clientId: clientIdSchema.optional(),
})

export const serverSchema = z.strictObject({
  host: z.string().min(1).default('127.0.0.1'),
  port: z.number().int().min(0).max(65_535).default(7070),
  /** Bearer token for /v1/admin routes; without it the admin routes answer 403. */
  adminToken: z.string().min(8).optional(),
  /**
   * Bearer token for the read routes (/v1/resources*, /metrics). Reads need a token when this
   * is set or tenants are configured (a tenant's token then sees its own clients only).
   */
  readToken: z.string().min(8).optional(),
  tls: tlsSchema.optional(),
  /** Lease proofs (HMAC-SHA256); also from SLUICE_HOLDINGS_KEY and SLUICE_HOLDINGS_KEY_PREVIOUS. */
  holdingsKey: holdingsKeySchema.optional(),
  /**
   * Directory of the embedded ledger of commitments (a file, fsynced before a lease is sent):
   * a restarted coordinator resumes from it instead of learning. Unset: no ledger. Read at
   * start. `sluice serve` defaults it to ./sluice-data; replicas on etcd keep it in etcd.
   */
  dataDir: z.string().min(1).optional(),
  /**
   * A data directory that holds no ledger yet (a first start): `serve` at once (nothing can be
   * outstanding; a client that holds a lease of another ledger makes it learn), or `learn` as
   * without a ledger. Read at start.
   */
  freshLedger: z.enum(['serve', 'learn']).default('serve'),
  /**
   * Longest a ledger write may take, ms: every lease counts this much longer, and a batch whose
   * write took longer is not sent (its leases lapse).
   */
  ledgerMaxWriteMs: ms(1, 60_000).default(500),
  /** A reload may remove TLS, the admin token, the read token or tenant authentication only with this set. */
  securityDowngrade: z.boolean().default(false),
  limits: limitsSchema.prefault({}),
  ha: haSchema.optional(),
  parent: parentSchema.optional(),
})

export const tenantSchema = z.strictObject({
  /** Bearer token the tenant's clients present. */
  token: z.string().min(8),
  weight: weight.default(1),
  /** Resource pattern → most the tenant may hold of each matching resource. */
  caps: z.record(z.string().min(1), quantity).default({}),
  /** Resource patterns the tenant may use; absent: all. */
  resources: z.array(z.string().min(1)).optional(),
  /** Most clients of this tenant at once. */
  maxClients: z.number().int().min(1).optional(),
  /** The priority bands this tenant's clients may use, [min, max]; a report outside is refused. */
  priorities: z
    .tuple([z.number().int(), z.number().int()])
    .default([0, 0])
    .refine(([min, max]) => min <= max, { message: 'min must not be above max' })
    .refine(
      ([min, max]) =>
        Math.abs(min) <= domainLimits.maxPriority && Math.abs(max) <= domainLimits.maxPriority,
      {
        message: `priorities must lie within ±${domainLimits.maxPriority}`,
      },
    ),
})

/** Reports each estimator looks back over unless `window` says: `fast` 1, the others 5. */
export const defaultDemandWindow = Object.freeze({ fast: 1, max: 5, ewma: 5 })

export const demandEstimatorSchema = z
  .strictObject({
    estimator: z.enum(demandEstimators).default('fast'),
    /** Reports the estimator looks back over (`fast`: consecutive lower reports before it follows a drop). */
    window: z.number().int().min(1).max(100).optional(),
  })
  .transform((d) => ({
    estimator: d.estimator,
    window: d.window ?? defaultDemandWindow[d.estimator],
  }))

export const resourceTemplateSchema = z
  .strictObject({
    match: z.string().min(1).max(1024),
    kind: z.enum(resourceKinds),
    /** Tokens/s (rate) or slots (concurrency); per client with `static`. */
    capacity: quantity,
    /** Rate only: tokens the whole resource may burst; default one second of capacity. */
    burst: quantity.optional(),
    /**
     * Rate only: the time `capacity` (and a plan's capacities) is per, a duration such as 1s,
     * 1m or 1h (default 1s): `capacity: 100, per: 1m` is 100 a minute, refilled evenly, with
     * a burst of the whole 100 unless `burst` says otherwise.
     */
    per: z.string().min(1).optional(),
    algorithm: z.enum(algorithms).default(defaultAlgorithm),
    surplus: z.enum(surplusPolicies).default(defaultSurplus),
    /**
     * With surplus spread: a lease that covers its client's demand stays as it is while no
     * client needs capacity and its target moved by at most this fraction (0: every move is sent).
     */
    headroomTolerance: z.number().min(0).max(0.5).default(0.1),
    leaseTtlMs: ms(100, 3_600_000).default(10_000),
    refreshMs: ms(10, 600_000).default(1_000),
    graceMs: ms(0, 600_000).default(2_000),
    /**
     * Quota: how long before its window's end a lease of the window ends (the grace of a
     * quota's lease, in place of graceMs): it covers the coordinator's ledger write and the
     * one-way delay of the lease, so that no unit of a window is spent after its edge by the
     * coordinator's clock; the next window's leases go out at the edge.
     */
    windowGraceMs: ms(0, 60_000).default(250),
    /**
     * After a start or a failover, how long the coordinator only re-learns what clients hold.
     * Default leaseTtlMs + graceMs + safeHoldMs; shorter is refused unless unsafeLearning.
     */
    learningMs: ms(0, 3_600_000).optional(),
    /** Allows a learningMs shorter than a commitment's life: a restart may then over-grant. */
    unsafeLearning: z.boolean().default(false),
    /** Per client, when the coordinator is unreachable; default capacity / clients, never above the client's lease. */
    safeCapacity: quantity.optional(),
    /** How long safe mode may use safeCapacity after a lease lapses, then 0; default leaseTtlMs / 2. */
    safeHoldMs: ms(0, 3_600_000).optional(),
    /** Default: `fast` (1 report), or for a quota `max` over 5 reports (see resolve.ts). */
    demand: demandEstimatorSchema.optional(),
    /** Downstream coordinators (server.parent): capacity when the parent's lease lapses. */
    failureMode: z.enum(failureModes).default('safe'),
    /**
     * A keyed family: `match` is `<prefix>/*` and every id under it (`<prefix>/<key>`) is a
     * limit of its own of `capacity` (and `burst`), shared by the processes that use the key.
     */
    keyed: z.boolean().default(false),
    /** Keyed: a plan of per-key limits, key → { capacity, burst }, for keys that differ. */
    keys: z
      .record(
        z.string().min(1).max(256),
        z.strictObject({ capacity: quantity, burst: quantity.optional() }),
      )
      .refine((k) => Object.keys(k).length <= maxPlanKeys, {
        message: `at most ${maxPlanKeys} keys`,
      })
      .default({}),
    /** Keyed: most keys of the family leased one by one (hot keys) at once; past it, keys stay at the default split. */
    maxHotKeys: z.number().int().min(1).max(1_000_000).default(1000),
    /**
     * Keyed: most processes holding a default share of every key; past it, the processes that
     * use the family most hold one, the rest ask for the keys they use. Default: as many as
     * leave each of them at least one token (or slot) of every key's burst.
     */
    maxDefaultHolders: z.number().int().min(1).max(1_000_000).optional(),
    /**
     * A keyed quota: the most of every key's budget the default shares of a window may hold
     * together (a fraction, default 1). A share is never given back within its window, so a
     * process that restarts leaves its share spent: a smaller whole strands less per restart,
     * and more keys are leased on their own.
     */
    defaultShare: z.number().gt(0).max(1).optional(),
    /**
     * Quota: the window `capacity` is a budget of. A duration aligned to the epoch (`60s`,
     * `15m`, `1h`, `1d`; it divides a day or is whole days), or a calendar unit in a time zone
     * (`{ unit: day | week | month, timeZone: Europe/Paris }`).
     */
    window: z
      .union([
        z.string().min(1),
        // Refused below with what to write instead (a bare number: seconds or milliseconds?).
        z.number(),
        z.strictObject({
          unit: z.enum(['day', 'week', 'month']),
          timeZone: z.string().min(1).default('UTC'),
        }),
      ])
      .optional(),
  })
  .superRefine((t, ctx) => {
    if (t.per !== undefined) {
      const perMs = parseDuration(t.per)
      if (t.kind !== 'rate')
        ctx.addIssue({
          code: 'custom',
          path: ['per'],
          message: kindTraits[t.kind].perWindow
            ? `per is for kind: rate; a quota is a budget per window: window: ${t.per}`
            : 'per is for kind: rate',
        })
      else if (perMs === undefined || perMs < 1000)
        ctx.addIssue({
          code: 'custom',
          path: ['per'],
          message: `a duration of a second or more, such as 1s, 1m or 1h; received ${JSON.stringify(t.per)}`,
        })
    }
    if (t.burst !== undefined && !kindTraits[t.kind].refills)
      ctx.addIssue({
        code: 'custom',
        path: ['burst'],
        message: kindTraits[t.kind].perWindow
          ? "burst is for kind: rate; a quota's whole budget (capacity) may be spent at once"
          : 'burst is for kind: rate; a concurrency limit is its capacity in slots',
      })
    if (typeof t.window === 'number') {
      ctx.addIssue({
        code: 'custom',
        path: ['window'],
        message: `a duration as text with its unit, such as '${t.window}s' or '1m'; received the number ${t.window}`,
      })
      return
    }
    if (kindTraits[t.kind].perWindow) {
      if (t.window === undefined)
        ctx.addIssue({
          code: 'custom',
          path: ['window'],
          message:
            'a quota needs its window: a duration such as 1h or 1d, or { unit: day, timeZone }',
        })
      else if (typeof t.window === 'string') {
        const ms = parseDuration(t.window)
        if (ms === undefined)
          ctx.addIssue({
            code: 'custom',
            path: ['window'],
            message: `a duration such as 60s, 15m, 1h or 1d, or { unit, timeZone }; received ${JSON.stringify(t.window)}`,
          })
        else if (ms < 1000 || (86_400_000 % ms !== 0 && ms % 86_400_000 !== 0))
          ctx.addIssue({
            code: 'custom',
            path: ['window'],
            message: `${t.window} does not divide a day (nor is it whole days), so its windows would drift against the days: pick 1m, 5m, 15m, 1h, 6h, 1d, 7d`,
          })
      } else if (!isTimeZone(t.window.timeZone))
        ctx.addIssue({
          code: 'custom',
          path: ['window', 'timeZone'],
          message: `${JSON.stringify(t.window.timeZone)} is not a time zone this runtime knows (IANA names, e.g. Europe/Paris)`,
        })
    } else if (t.window !== undefined)
      ctx.addIssue({ code: 'custom', path: ['window'], message: 'a window is for kind: quota' })
    if (t.defaultShare !== undefined && !(t.keyed && kindTraits[t.kind].perWindow))
      ctx.addIssue({
        code: 'custom',
        path: ['defaultShare'],
        message: 'defaultShare is for a keyed quota (keyed: true, kind: quota)',
      })
    if (!t.keyed) {
      if (Object.keys(t.keys).length > 0)
        ctx.addIssue({
          code: 'custom',
          path: ['keys'],
          message: 'a plan of keys needs keyed: true',
        })
      return
    }
    if (!/^[^*?[]+\/\*$/.test(t.match))
      ctx.addIssue({
        code: 'custom',
        path: ['match'],
        message: `a keyed family is matched as <prefix>/*, e.g. apikey/*; received ${JSON.stringify(t.match)}`,
      })
    if (t.algorithm !== 'fair-share')
      ctx.addIssue({
        code: 'custom',
        path: ['algorithm'],
        message: 'a keyed family shares each key by fair-share',
      })
  })
  .refine((t) => t.refreshMs < t.leaseTtlMs, {
    message: 'refreshMs must be below leaseTtlMs, or leases lapse between renewals',
    path: ['refreshMs'],
  })
  .superRefine((t, ctx) => {
    if (t.learningMs === undefined || t.unsafeLearning) return
    const lifeMs = commitmentLifeMs(t)
    if (t.learningMs < lifeMs)
      ctx.addIssue({
        code: 'custom',
        path: ['learningMs'],
        message: `${t.learningMs} is shorter than leaseTtlMs + graceMs + safeHoldMs (${lifeMs}): a restarted coordinator could grant what clients still hold; raise it, or set unsafeLearning: true`,
      })
  })
  .transform(perSecond)

/**
 * A rate given `per` a longer time, as the rest of Sluice counts it: per second, the burst
 * (unless set) the whole amount per `per` (`capacity: 100, per: 1m` is 100/60 a second with a
 * burst of 100), a plan's entries likewise.
 */
function perSecond<
  T extends {
    capacity: number
    burst?: number | undefined
    per?: string | undefined
    keys: Record<string, { capacity: number; burst?: number | undefined }>
  },
>(t: T): T {
  const perMs = t.per === undefined ? undefined : parseDuration(t.per)
  if (perMs === undefined || perMs === 1000) return t
  const scale = 1000 / perMs
  const keys: Record<string, { capacity: number; burst?: number | undefined }> = {}
  for (const [key, p] of Object.entries(t.keys))
    keys[key] = { ...p, capacity: p.capacity * scale, burst: p.burst ?? p.capacity }
  return { ...t, capacity: t.capacity * scale, burst: t.burst ?? t.capacity, keys }
}

export const configSchema = z
  .strictObject({
    server: serverSchema.prefault({}),
    tenants: z.record(z.string().min(1).max(domainLimits.maxIdLength), tenantSchema).default({}),
    resources: z.array(resourceTemplateSchema).min(1),
  })
  .superRefine((config, ctx) => {
    // Followers send clients to the advertised URL: under TLS, never in clear.
    if (
      config.server.tls !== undefined &&
      config.server.ha?.advertise?.startsWith('ws://') === true
    )
      ctx.addIssue({
        code: 'custom',
        path: ['server', 'ha', 'advertise'],
        message: 'must be a wss:// URL when server.tls is set: followers send clients there',
      })
    const seen = new Map<string, string>()
    for (const [name, tenant] of Object.entries(config.tenants)) {
      const other = seen.get(tenant.token)
      if (other !== undefined) {
        ctx.addIssue({
          code: 'custom',
          path: ['tenants', name, 'token'],
          message: `same token as tenant ${other}`,
        })
      }
      seen.set(tenant.token, name)
    }
  })

export type ConfigInput = z.input<typeof configSchema>
export type Config = z.output<typeof configSchema>
export type ResourceTemplate = z.output<typeof resourceTemplateSchema>
export type TenantConfig = z.output<typeof tenantSchema>
export type Limits = z.output<typeof limitsSchema>
export type HaConfig = z.output<typeof haSchema>
export type ParentConfig = z.output<typeof parentSchema>
export type TlsConfig = z.output<typeof tlsSchema>
export type HoldingsKeyConfig = z.output<typeof holdingsKeySchema>
