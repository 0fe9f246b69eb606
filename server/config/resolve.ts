import { createHash } from 'node:crypto'
import {
  defaultBurst,
  defaultLearningMs,
  keyLimits,
  kindTraits,
  safeHoldMsOf,
  type DemandEstimator,
  type FailureMode,
  type ResourceKind,
} from '../../shared/index.js'
import type { AllocationProblem } from '../allocation/index.js'
import { PatternList } from './glob.js'
import { parseDuration, type WindowSpec } from './window.js'
import {
  defaultDemandWindow,
  type Config,
  type ResourceTemplate,
  type TenantConfig,
} from './schema.js'

/** Everything the coordinator needs to know about one resource, defaults applied. Frozen. */
export interface ResourceSettings {
  readonly id: string
  readonly kind: ResourceKind
  readonly capacity: number
  /** Tokens the whole resource may burst (rate); each lease gets its share. */
  readonly burst: number
  readonly algorithm: NonNullable<AllocationProblem['algorithm']>
  readonly surplus: NonNullable<AllocationProblem['surplus']>
  readonly leaseTtlMs: number
  readonly refreshMs: number
  readonly graceMs: number
  readonly learningMs: number
  /** Undefined: capacity / clients. */
  readonly safeCapacity: number | undefined
  /** How long a client may run at its safe capacity after its lease lapses. */
  readonly safeHoldMs: number
  readonly estimator: DemandEstimator
  readonly window: number
  /** Tenant name → { weight, cap } for this resource. */
  readonly tenants: Readonly<Record<string, { weight: number; cap?: number }>>
  /** Downstream coordinators: what capacity follows when the parent's lease lapses. */
  readonly failureMode: FailureMode
  /**
   * Downstream coordinators: when the parent's lease in force ends. No lease granted
   * here outlives it. Undefined: leases run their full leaseTtlMs.
   */
  readonly leaseDeadlineMs?: number | undefined
  /**
   * Surplus spread: how far (a fraction of the target) a lease that covers its client's
   * demand may stay from its target while no client needs capacity. Undefined or 0: exact.
   */
  readonly headroomTolerance?: number | undefined
  /**
   * Keyed families: set on the family's own resource (`role: 'family'`, id `<prefix>/*`,
   * capacity 1: the whole of every key, shared out as default shares) and on each key's
   * resource (`role: 'key'`, id `<prefix>/<key>`, the key's capacity).
   */
  readonly family?: FamilySettings | undefined
  /** Quota: the window `capacity` is a budget of. */
  readonly quotaWindow?: WindowSpec | undefined
}

/** What a keyed family is, for its own resource and each of its keys. */
export interface FamilySettings {
  readonly role: 'family' | 'key'
  /** `apikey` for `apikey/*`. */
  readonly prefix: string
  /** The family's own resource id: its template's match, `<prefix>/*`. */
  readonly familyId: string
  /** The kind of every key (the family's own resource is a share, always fractional). */
  readonly keyKind: ResourceKind
  /** A key's capacity and burst unless the plan names it. */
  readonly keyCapacity: number
  readonly keyBurst: number
  /** Keys whose limits differ: key → { capacity, burst }. */
  readonly plan: Readonly<Record<string, { readonly capacity: number; readonly burst: number }>>
  readonly maxHotKeys: number
  /** Most processes that hold a default share at once (see the template's maxDefaultHolders). */
  readonly maxDefaultHolders: number
  /** A keyed quota: the most of every key's budget a window's default shares hold (default 1). */
  readonly defaultShare?: number | undefined
}

/** Whether `s` are a keyed family's own resource (`<prefix>/*`: its default shares). */
export function isFamilyShare(s: { readonly family?: FamilySettings | undefined }): boolean {
  return s.family?.role === 'family'
}

/** Whether `s` are one key of a keyed family (`<prefix>/<key>`: a hot key). */
export function isFamilyKey(s: { readonly family?: FamilySettings | undefined }): boolean {
  return s.family?.role === 'key'
}

/** A quota template's window, parsed. */
export function windowSpecOf(t: ResourceTemplate): WindowSpec | undefined {
  if (!kindTraits[t.kind].perWindow || t.window === undefined || typeof t.window === 'number')
    return undefined
  if (typeof t.window !== 'string') return { kind: 'calendar', ...t.window }
  return { kind: 'fixed', ms: parseDuration(t.window)! }
}

/** The longest a window of `spec` lasts, ms. */
function windowLengthMs(spec: WindowSpec): number {
  if (spec.kind === 'fixed') return spec.ms
  return { day: 25, week: 7 * 24 + 1, month: 31 * 24 + 1 }[spec.unit] * 3_600_000
}

/**
 * What a quota changes in a resource's settings: no safe fallback (a
 * lapsed block is spent, not refilled), no surplus spread (budget handed
 * out is gone for the window), and without a ledger, learning for a whole
 * window: a coordinator that cannot know what was used in it grants
 * nothing until the next one.
 */
function quotaSettings(t: ResourceTemplate): Partial<ResourceSettings> {
  const window = windowSpecOf(t)
  if (window === undefined) return {}
  return {
    quotaWindow: window,
    safeCapacity: 0,
    surplus: 'hold',
    headroomTolerance: 0,
    learningMs: quotaLearningMs(t, window),
  }
}

/** A quota learns a whole window without a ledger, unless told otherwise with unsafeLearning. */
function quotaLearningMs(t: ResourceTemplate, window: WindowSpec): number {
  if (t.unsafeLearning && t.learningMs !== undefined) return t.learningMs
  return Math.max(defaultLearningMs(t), windowLengthMs(window))
}

/** The family of a keyed template (undefined for others). */
function familyOf(t: ResourceTemplate, role: 'family' | 'key'): FamilySettings | undefined {
  if (!t.keyed) return undefined
  const keyBurst = defaultBurst(t.kind, t.capacity, t.burst)
  const plan: Record<string, { capacity: number; burst: number }> = {}
  for (const [key, p] of Object.entries(t.keys))
    plan[key] = { capacity: p.capacity, burst: defaultBurst(t.kind, p.capacity, p.burst) }
  // Each default holder keeps at least one whole token (or slot) of the smallest burst.
  let smallest = keyBurst
  for (const p of Object.values(plan)) smallest = Math.min(smallest, p.burst)
  return Object.freeze({
    role,
    prefix: t.match.slice(0, -2),
    familyId: t.match,
    keyKind: t.kind,
    keyCapacity: t.capacity,
    keyBurst,
    plan: Object.freeze(plan),
    maxHotKeys: t.maxHotKeys,
    maxDefaultHolders: t.maxDefaultHolders ?? Math.max(1, Math.floor(smallest + 1e-9)),
    ...(t.defaultShare === undefined ? {} : { defaultShare: t.defaultShare }),
  })
}

/**
 * The life of a lease sent at `nowMs`: the template's `leaseTtlMs`, cut
 * short under a parent's lease, since nothing granted here may outlive it.
 */
export function leaseTtlMsAt(s: ResourceSettings, nowMs: number): number {
  return s.leaseDeadlineMs === undefined
    ? s.leaseTtlMs
    : Math.max(0, Math.min(s.leaseTtlMs, Math.floor(s.leaseDeadlineMs - nowMs)))
}

function tokenDigest(token: string): string {
  return createHash('sha256').update(token).digest('base64')
}

/** One key's kind, capacity and burst: the plan's, else the family's. */
export function keyShape(
  f: FamilySettings,
  key: string,
): { kind: ResourceKind; capacity: number; burst: number } {
  const limits = keyLimits(f.plan, key, { capacity: f.keyCapacity, burst: f.keyBurst })
  return { kind: f.keyKind, capacity: limits.capacity, burst: limits.burst }
}

/** A template's learning period, defaults applied. */
export function templateLearningMs(t: ResourceTemplate): number {
  const window = windowSpecOf(t)
  return window === undefined ? defaultLearningMs(t) : quotaLearningMs(t, window)
}

/**
 * Settings with some changed, as a new frozen object. A keyed family's key
 * has its settings over a shared object (`settingsFor`), so a spread would
 * copy its id alone: this copies what it inherits too.
 */
export function copySettings(
  settings: ResourceSettings,
  changes: Partial<ResourceSettings>,
): ResourceSettings {
  const copy: Record<string, unknown> = {}
  for (const k in settings) copy[k] = settings[k as keyof ResourceSettings]
  return Object.freeze({ ...(copy as unknown as ResourceSettings), ...changes })
}

/**
 * A config compiled for look-ups: resource templates and tenant patterns as
 * pattern lists, tenants by token.
 */
export class CompiledConfig {
  readonly config: Config
  readonly #templates: PatternList<ResourceTemplate>
  readonly #tenantsByToken = new Map<string, string>()
  readonly #tenantCaps = new Map<string, PatternList<number>>()
  readonly #tenantResources = new Map<string, PatternList<true>>()
  #uncappedTenants: ResourceSettings['tenants'] | undefined
  /** Per keyed template: the settings its keys of the family's own capacity share (`settingsFor`). */
  #keyDefaults: Map<ResourceTemplate, Omit<ResourceSettings, 'id'>> | undefined
  readonly #families = new Map<
    ResourceTemplate,
    { family?: FamilySettings | undefined; key?: FamilySettings | undefined }
  >()

  constructor(config: Config) {
    this.config = config
    this.#templates = new PatternList(config.resources.map((t) => [t.match, t] as const))
    for (const [name, tenant] of Object.entries(config.tenants)) {
      this.#tenantsByToken.set(tokenDigest(tenant.token), name)
      this.#tenantCaps.set(name, new PatternList(Object.entries(tenant.caps)))
      if (tenant.resources !== undefined) {
        this.#tenantResources.set(
          name,
          new PatternList(tenant.resources.map((p) => [p, true] as const)),
        )
      }
    }
  }

  get requiresToken(): boolean {
    return this.#tenantsByToken.size > 0
  }

  /**
   * The tenant whose token this is. Looked up by SHA-256 digest, so the time
   * a look-up takes tells nothing about how much of a token was right.
   */
  tenantByToken(token: string): string | undefined {
    return this.#tenantsByToken.get(tokenDigest(token))
  }

  tenant(name: string): TenantConfig | undefined {
    return Object.hasOwn(this.config.tenants, name) ? this.config.tenants[name] : undefined
  }

  /** Whether tenant `name` may use resource `id`. */
  allows(name: string | undefined, id: string): boolean {
    if (name === undefined) return true
    const list = this.#tenantResources.get(name)
    return list === undefined || list.match(id) === true
  }

  /** The longest learning period of any template: how long a new coordinator learns. */
  maxLearningMs(): number {
    let max = 0
    for (const t of this.config.resources) max = Math.max(max, templateLearningMs(t))
    return max
  }

  /**
   * The tenants' weights and caps for resource `id`; the same frozen object for every id
   * no tenant caps (a family's keys, by the thousand, share one).
   */
  #tenantsFor(id: string): ResourceSettings['tenants'] {
    let capped = false
    const tenants: Record<string, { weight: number; cap?: number }> = {}
    for (const [name, tenant] of Object.entries(this.config.tenants)) {
      const cap = this.#tenantCaps.get(name)!.match(id)
      if (cap !== undefined) capped = true
      tenants[name] = cap === undefined ? { weight: tenant.weight } : { weight: tenant.weight, cap }
    }
    if (capped) return Object.freeze(tenants)
    return (this.#uncappedTenants ??= Object.freeze(tenants))
  }

  /** A template's family settings, made once per template and role (its keys share them). */
  #familyOf(t: ResourceTemplate, role: 'family' | 'key'): FamilySettings | undefined {
    if (!t.keyed) return undefined
    let roles = this.#families.get(t)
    if (roles === undefined) this.#families.set(t, (roles = {}))
    return (roles[role] ??= familyOf(t, role))
  }

  /**
   * The family a key's id is of (its key role), without making the key's settings: what a
   * remote decision needs of a key asked for, by the thousand a second (coordinator/central.ts).
   */
  familyOfKey(id: string): FamilySettings | undefined {
    const t = this.#templates.match(id)
    if (t === undefined || id === t.match) return undefined
    return this.#familyOf(t, 'key')
  }

  /** Settings for resource `id`, or undefined when no template matches. */
  settingsFor(id: string): ResourceSettings | undefined {
    const t = this.#templates.match(id)
    if (t === undefined) return undefined
    const family = this.#familyOf(t, id === t.match ? 'family' : 'key')
    if (family?.role !== 'key') return this.#build(t, id, family)
    const key = id.slice(family.prefix.length + 1)
    const tenants = this.#tenantsFor(id)
    if (Object.hasOwn(family.plan, key) || tenants !== this.#tenantsFor(t.match))
      return this.#build(t, id, family)
    // A key of the family's own capacity, no tenant capping it apart: its settings are its id
    // over the family's keys' shared ones (a hot key costs the coordinator ~200 bytes less).
    // Read them as any settings; copy them with `copySettings`, not a spread.
    let shared = this.#keyDefaults?.get(t)
    if (shared === undefined) {
      // Without an id of its own: each key's is its own property (assigned: a property defined
      // with a descriptor makes a slower, larger object).
      shared = this.#build(t, t.match, family, false)
      ;(this.#keyDefaults ??= new Map()).set(t, shared)
    }
    const settings = Object.create(shared) as { id: string }
    settings.id = id
    return Object.freeze(settings as ResourceSettings)
  }

  #build(t: ResourceTemplate, id: string, family: FamilySettings | undefined): ResourceSettings
  #build(
    t: ResourceTemplate,
    id: string,
    family: FamilySettings | undefined,
    withId: false,
  ): Omit<ResourceSettings, 'id'>
  #build(
    t: ResourceTemplate,
    id: string,
    family: FamilySettings | undefined,
    withId = true,
  ): Omit<ResourceSettings, 'id'> {
    const safeHoldMs = safeHoldMsOf(t)
    // A keyed family's own resource is a share of every key: capacity 1, fractional, held.
    const shape =
      family === undefined
        ? { kind: t.kind, capacity: t.capacity, burst: defaultBurst(t.kind, t.capacity, t.burst) }
        : family.role === 'family'
          ? { kind: 'rate' as const, capacity: 1, burst: 1 }
          : keyShape(family, id.slice(family.prefix.length + 1))
    return Object.freeze({
      ...(withId ? { id } : {}),
      ...shape,
      algorithm: t.algorithm,
      surplus: t.surplus,
      leaseTtlMs: t.leaseTtlMs,
      refreshMs: t.refreshMs,
      // A quota's lease ends windowGraceMs before its window does, not graceMs before.
      graceMs: windowSpecOf(t) === undefined ? t.graceMs : t.windowGraceMs,
      learningMs: defaultLearningMs({ ...t, safeHoldMs }),
      safeCapacity: t.safeCapacity,
      safeHoldMs,
      ...(t.demand ?? defaultDemandOf(t.kind, family?.role)),
      tenants: this.#tenantsFor(id),
      failureMode: t.failureMode,
      headroomTolerance:
        family?.role === 'family' ? 0 : t.surplus === 'spread' ? t.headroomTolerance : 0,
      ...quotaSettings(t),
      ...(family === undefined
        ? {}
        : { family, ...(family.role === 'family' ? { surplus: 'hold' as const } : {}) }),
    })
  }

  /** The keyed families the config declares, by prefix. */
  families(): FamilySettings[] {
    const out: FamilySettings[] = []
    for (const t of this.config.resources) {
      const f = familyOf(t, 'family')
      if (f !== undefined) out.push(f)
    }
    return out
  }
}

/**
 * A template's demand estimator unless it names one: `fast` for a rate or a
 * concurrency (a lease follows a rise at once), `max` over 5 reports for a
 * quota (a block is sized by the peak of the last few reports, so a demand
 * that comes in bursts between reports does not shrink blocks it is spending)
 * and for a keyed family's key: a key is asked for a few times a second at
 * each process, so one report's count is mostly noise (asked 0.9 times a
 * second, a period counts none 4 times in 10), and `fast` followed each dip,
 * moving the key's shares every round; a share that moves brings no burst, so
 * each move lost what the riser's bucket would have held ("100 per minute":
 * docs/keys.md, "A key's demand is the most of its last five reports").
 */
function defaultDemandOf(
  kind: ResourceKind,
  role: FamilySettings['role'] | undefined,
): { estimator: DemandEstimator; window: number } {
  return kindTraits[kind].perWindow || role === 'key'
    ? { estimator: 'max', window: defaultDemandWindow.max }
    : { estimator: 'fast', window: defaultDemandWindow.fast }
}
