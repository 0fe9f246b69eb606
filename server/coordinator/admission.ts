import {
  describeValue,
  formatError,
  keyOfId,
  keyProblem,
  protocolVersion,
  type DemandEntry,
  type ErrorCode,
  type HelloMessage,
  type ServerMessage,
} from '../../shared/index.js'
import {
  isFamilyKey,
  type CompiledConfig,
  type Limits,
  type ResourceSettings,
} from '../config/index.js'
import { centralClientId, clientKey, type Pool } from '../pool/index.js'

/** A refusal: the code to send and what to add to its catalogue line. */
export interface Refusal {
  readonly code: ErrorCode
  readonly detail: string
}

/** What admission reads; the pool and config are the coordinator's current ones. */
export interface AdmissionContext {
  readonly config: CompiledConfig
  readonly limits: Limits
  readonly pool: Pool
  readonly settingsFor: (id: string) => ResourceSettings | undefined
}

/**
 * A per-tenant bound: as configured, else half of the global one when two
 * or more tenants share the coordinator (no one tenant can lock the others
 * out), else the global one.
 */
function perTenant(ctx: AdmissionContext, configured: number | undefined, global: number): number {
  if (configured !== undefined) return configured
  return Object.keys(ctx.config.config.tenants).length >= 2
    ? Math.max(1, Math.floor(global / 2))
    : global
}

/**
 * Whether a hello may start a session: protocol version, tenant token, and
 * the client bounds (in total and per tenant). Returns the tenant, or a refusal.
 */
export function admitClient(
  ctx: AdmissionContext,
  hello: HelloMessage,
  upgradeToken: string | undefined,
  internal?: { readonly tenant: string | undefined },
): { tenant: string | undefined } | Refusal {
  if (hello.v !== protocolVersion) {
    return {
      code: 'SLUICE_ERR_PROTO_VERSION',
      detail: `coordinator speaks v${protocolVersion}, client sent v${hello.v}`,
    }
  }
  // The coordinator's own part of every key connects in-process only (central.ts).
  if (internal === undefined && hello.clientId === centralClientId)
    return {
      code: 'SLUICE_ERR_AUTH_INVALID_TOKEN',
      detail: `the client id ${centralClientId} is the coordinator's own; choose another`,
    }
  // The coordinator's own part (one client per tenant) holds no place of the clients' bounds.
  if (internal !== undefined) return { tenant: internal.tenant }
  let tenant: string | undefined
  if (ctx.config.requiresToken) {
    const token = hello.token ?? upgradeToken
    tenant = token === undefined ? undefined : ctx.config.tenantByToken(token)
    if (tenant === undefined)
      return { code: 'SLUICE_ERR_AUTH_INVALID_TOKEN', detail: 'no tenant has this token' }
  }
  // The client bounds count live clients: a process that closed or died does not hold a place,
  // though what it was leased counts against capacity until it lapses. A hello that replaces a
  // live session adds no client.
  const { pool, limits } = ctx
  const key = clientKey(tenant, hello.clientId)
  const adds = !pool.isConnected(key)
  if (adds && pool.connectedCount() >= limits.maxClients)
    return { code: 'SLUICE_ERR_LIMIT_CLIENTS', detail: `limits.maxClients is ${limits.maxClients}` }
  // Memory: clients gone but still holding leases are bounded too, by twice maxClients.
  if (!pool.hasClient(key) && pool.clientCount >= 2 * limits.maxClients)
    return {
      code: 'SLUICE_ERR_LIMIT_CLIENTS',
      detail: `${pool.clientCount} clients hold leases; limits.maxClients is ${limits.maxClients}`,
    }
  const tenantMax =
    tenant === undefined
      ? undefined
      : (ctx.config.tenant(tenant)?.maxClients ??
        perTenant(ctx, limits.maxClientsPerTenant, limits.maxClients))
  if (tenant !== undefined && tenantMax !== undefined && adds)
    if (pool.connectedCount(tenant) >= tenantMax)
      return {
        code: 'SLUICE_ERR_LIMIT_CLIENTS',
        detail: `tenant ${tenant} allows ${tenantMax} clients`,
      }
  return { tenant }
}

/**
 * The hot-key slots of a family that are `tenant`'s: with two or more
 * tenants allowed the family, its weight's part of `maxHotKeys` (at least
 * one), so one tenant's keys cannot take every slot; undefined (no bound
 * but the family's) otherwise.
 */
function tenantHotKeys(
  ctx: AdmissionContext,
  familyId: string,
  maxHotKeys: number,
  tenant: string | undefined,
): number | undefined {
  if (tenant === undefined) return undefined
  let weights = 0
  let allowed = 0
  for (const [name, t] of Object.entries(ctx.config.config.tenants))
    if (ctx.config.allows(name, familyId)) {
      weights += t.weight
      allowed++
    }
  const own = ctx.config.tenant(tenant)
  if (allowed < 2 || own === undefined || !(weights > 0)) return undefined
  return Math.max(1, Math.floor((maxHotKeys * own.weight) / weights))
}

/**
 * Whether a client may start using a resource: a template matches it, its
 * tenant may use it, and neither the client's nor the coordinator's resource
 * bound is reached. `alreadyAdded` counts the resources admitted earlier in
 * the same message, which the pool does not know yet.
 */
export function admitResource(
  ctx: AdmissionContext,
  key: string,
  tenant: string | undefined,
  resourceId: string,
  alreadyAdded: number,
  familyInFrame?: (familyId: string) => boolean,
): Refusal | undefined {
  const { pool, limits } = ctx
  const settings = ctx.settingsFor(resourceId)
  if (settings === undefined)
    return {
      code: 'SLUICE_ERR_RESOURCE_UNKNOWN',
      detail: `no resource template matches ${JSON.stringify(resourceId)}`,
    }
  if (!ctx.config.allows(tenant, resourceId))
    return {
      code: 'SLUICE_ERR_RESOURCE_FORBIDDEN',
      detail: `tenant ${tenant} may not use ${JSON.stringify(resourceId)}`,
    }
  // A key of a family: bounded by the family's hot keys, not by the client's resources.
  const family = settings.family
  if (isFamilyKey(settings) && family !== undefined) {
    // The key rule is the client library's (shared/keys.ts); a client that does not keep it (an
    // old or hostile one) has the key refused here, the connection left open.
    const problem = keyProblem(family.prefix, keyOfId(family.prefix, resourceId) ?? '')
    if (problem !== undefined)
      return { code: 'SLUICE_ERR_KEY_INVALID', detail: `${describeValue(resourceId)}: ${problem}` }
    // Only a holder of the family asks for its keys (a KeyedFamily reports the family with its
    // keys): a key asked for on its own is client.resource() where client.keyed() was meant.
    if (
      familyInFrame !== undefined &&
      !pool.isSubscribed(key, family.familyId) &&
      !familyInFrame(family.familyId)
    )
      return {
        code: 'SLUICE_ERR_RESOURCE_KEYED',
        detail: `${describeValue(resourceId)} is a key of the keyed family ${family.familyId}: use client.keyed('${family.prefix}').tryAcquire(key)`,
      }
    if (pool.hasResource(resourceId)) return undefined
    if (pool.hotKeyCount(family.familyId) + alreadyAdded >= family.maxHotKeys)
      return {
        code: 'SLUICE_ERR_LIMIT_RESOURCES',
        detail: `family ${family.familyId} leases ${family.maxHotKeys} keys one by one, its maxHotKeys; ${JSON.stringify(resourceId)} stays at the default share`,
      }
    const slots = tenantHotKeys(ctx, family.familyId, family.maxHotKeys, tenant)
    if (tenant !== undefined && slots !== undefined)
      if (pool.hotKeyCount(family.familyId, tenant) + alreadyAdded >= slots)
        return {
          code: 'SLUICE_ERR_LIMIT_RESOURCES',
          detail: `tenant ${tenant} has ${slots} of family ${family.familyId}'s ${family.maxHotKeys} hot keys (its weight's part); ${JSON.stringify(resourceId)} stays at the default share`,
        }
    return undefined
  }
  if (pool.subscriptionCount(key) + alreadyAdded >= limits.maxResourcesPerClient)
    return {
      code: 'SLUICE_ERR_LIMIT_RESOURCES',
      detail: `limits.maxResourcesPerClient is ${limits.maxResourcesPerClient}`,
    }
  if (tenant !== undefined && !pool.tenantUses(tenant, resourceId)) {
    const max = perTenant(ctx, limits.maxResourcesPerTenant, limits.maxResources)
    if (pool.tenantResourceCount(tenant) + alreadyAdded >= max)
      return {
        code: 'SLUICE_ERR_LIMIT_RESOURCES',
        detail: `tenant ${tenant} uses ${max} resources, its most (limits.maxResourcesPerTenant)`,
      }
  }
  if (!pool.hasResource(resourceId) && pool.resourceCount + alreadyAdded >= limits.maxResources)
    return {
      code: 'SLUICE_ERR_LIMIT_RESOURCES',
      detail: `limits.maxResources is ${limits.maxResources}`,
    }
  return undefined
}

/**
 * The priority a tenant's report may use: its own, when inside the tenant's
 * `priorities` range; a report that names none gets 0 moved into the range.
 * Without tenants, any priority the protocol allows.
 */
export function admitPriority(
  ctx: AdmissionContext,
  tenant: string | undefined,
  priority: number | undefined,
): number | undefined | Refusal {
  const range = tenant === undefined ? undefined : ctx.config.tenant(tenant)?.priorities
  if (range === undefined) return priority
  const [min, max] = range
  if (priority === undefined) return Math.min(max, Math.max(min, 0))
  if (priority < min || priority > max)
    return {
      code: 'SLUICE_ERR_AUTH_PRIORITY',
      detail: `tenant ${tenant} may use priorities ${min} to ${max}, received ${priority}`,
    }
  return priority
}

/** Called for each entry refused, with the resource it named. */
export type RefuseEntry = (resource: string, refusal: Refusal) => void

/**
 * The entries of one message whose resource the client already uses or may
 * start using; `refuse` hears of each other one. Returns the entries
 * themselves while all pass (the demand path runs per report), a copy from
 * the first refusal on.
 */
export function admitEntries<T>(
  ctx: AdmissionContext,
  key: string,
  tenant: string | undefined,
  entries: readonly T[],
  resourceOf: (entry: T) => string,
  refuse: RefuseEntry,
  options: { readonly keysNeedFamily?: boolean } = {},
): readonly T[] {
  let out: T[] | undefined
  let added = 0
  // The family ids of this frame, made only when a new key needs them.
  let families: Set<string> | undefined
  const familyInFrame = (familyId: string): boolean =>
    (families ??= new Set(entries.map(resourceOf).filter((id) => id.endsWith('/*')))).has(familyId)
  for (let i = 0; i < entries.length; i++) {
    const entry = entries[i]!
    const id = resourceOf(entry)
    if (!ctx.pool.isSubscribed(key, id)) {
      const refusal = admitResource(
        ctx,
        key,
        tenant,
        id,
        added,
        options.keysNeedFamily === true ? familyInFrame : undefined,
      )
      if (refusal !== undefined) {
        out ??= entries.slice(0, i)
        refuse(id, refusal)
        continue
      }
      added++
    }
    out?.push(entry)
  }
  return out ?? entries
}

/**
 * A demand report's entries with each priority admitted for the tenant
 * (moved into its range, or refused). At 10k clients a report a second each,
 * this runs 10k times a second: it copies the entries only when one changes
 * or is refused (docs/benchmarks.md, "per-report garbage").
 */
export function admitPriorities(
  ctx: AdmissionContext,
  tenant: string | undefined,
  entries: readonly DemandEntry[],
  refuse: RefuseEntry,
): readonly DemandEntry[] {
  let banded: DemandEntry[] | undefined
  for (let i = 0; i < entries.length; i++) {
    const entry = entries[i]!
    const verdict = admitPriority(ctx, tenant, entry.priority)
    if (verdict === entry.priority) {
      banded?.push(entry)
      continue
    }
    banded ??= entries.slice(0, i)
    if (typeof verdict === 'object') refuse(entry.resource, verdict)
    else banded.push({ ...entry, priority: verdict })
  }
  return banded ?? entries
}

/**
 * The refusals of one frame, answered with one error message per code (the
 * first resource in `resource`, all of them in `resources`), never one per
 * entry: what a frame full of refused ids earns back is bounded by the frame
 * itself (ids it sent, once each, plus a line), not multiplied by its
 * entries. Lazy: a frame with no refusal allocates nothing.
 */
export class FrameRefusals {
  #byCode: Map<ErrorCode, { detail: string; resources: string[] }> | undefined = undefined
  readonly #quietUnknown: boolean

  /** `quietUnknown`: unknown resources are counted, not answered (a hello's holdings after a config change). */
  constructor(quietUnknown: boolean) {
    this.#quietUnknown = quietUnknown
  }

  readonly add: RefuseEntry = (resource, refusal) => {
    const byCode = (this.#byCode ??= new Map<ErrorCode, { detail: string; resources: string[] }>())
    const held = byCode.get(refusal.code)
    if (held === undefined)
      byCode.set(refusal.code, { detail: refusal.detail, resources: [resource] })
    else held.resources.push(resource)
  }

  /** Counts each refusal with `count` and sends what is to be answered, one message per code. */
  flush(send: (message: ServerMessage) => void, count: (code: ErrorCode, n: number) => void): void {
    const byCode = this.#byCode
    if (byCode === undefined) return
    this.#byCode = undefined
    for (const [code, { detail, resources }] of byCode) {
      count(code, resources.length)
      if (this.#quietUnknown && code === 'SLUICE_ERR_RESOURCE_UNKNOWN') continue
      const more = resources.length > 1 ? ` (and ${resources.length - 1} more)` : ''
      send({
        type: 'error',
        code,
        message: formatError(code, `${detail}${more}`),
        resource: resources[0]!,
        ...(resources.length > 1 ? { resources } : {}),
      })
    }
  }
}
