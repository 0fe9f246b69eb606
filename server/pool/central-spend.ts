import { domainLimits, keyOfId } from '../../shared/index.js'
import { promoteDue } from './ahead.js'
import type { SpentReport } from './clients.js'
import type { LedgerEntry } from '../ledger/index.js'
import type { ClientState, Entry, SpendReserve } from './entry.js'
import { centralClientId } from './shapes/index.js'
import type { PoolState } from './state.js'

/**
 * What the coordinator's own part (server/coordinator/central.ts) spent of a keyed quota,
 * written ahead. It admits nothing it has not written as reserved first: of each key, per
 * window, at least what it answered admitted (`reserveSpend`, in the ledger with its family
 * entry before the answers leave). So when it dies with its coordinator, a new one can say
 * what the dead one spent, as a process that closes cleanly says it (handover.ts): its share
 * of the window is handed on less those units, and its keys leased on their own keep only
 * them (`deadCentralSpent`). Before, the dead part's quota shares stayed spent to the window's
 * end, a day for a daily quota (#41: a crowded keyed quota through a coordinator restart,
 * 76.6% of the central limiter).
 */

/**
 * Windows of reservations an entry keeps, counted back from the newest: the one in force, the
 * next (a check between the two spends of both), and the one after (reserved ahead of its first
 * checks once the next one's budget is in force at the part, which may be a few ms before the
 * coordinator's edge).
 */
const keptWindows = 3

/**
 * Shards a window's reservations are written in, each a ledger entry of its own
 * (`reserveShardId`): a write carries the shards of the keys raised since the last, not every
 * key's count. Written whole with the share's entry, the reservations of a family of 1,000 keys
 * made every write ~25 KB (a keyed quota over 30 gateways: 1 GB written to disk a minute).
 */
export const reserveShards = 64

const shardPrefix = '\u0000reserved\u0000'

/** The shard of `key` (FNV-1a over its UTF-16 code units). */
export function reserveShardOf(key: string): number {
  let h = 0x811c9dc5
  for (let i = 0; i < key.length; i++) h = Math.imul(h ^ key.charCodeAt(i), 0x01000193)
  return (h >>> 0) % reserveShards
}

/**
 * The ledger's name of a shard of reservations: no resource's (a NUL first; a catch-all template
 * of an earlier version that restores it finds an entry that commits nothing).
 */
export function reserveShardId(familyId: string, window: number, shard: number): string {
  return `${shardPrefix}${familyId}\u0000${window}\u0000${shard}`
}

/** The family, window and shard a ledger entry's name says, when it is a shard of reservations. */
export function parseReserveShardId(
  resource: string,
): { familyId: string; window: number; shard: number } | undefined {
  if (!resource.startsWith(shardPrefix)) return undefined
  const parts = resource.slice(shardPrefix.length).split('\u0000')
  if (parts.length !== 3) return undefined
  const window = Number(parts[1])
  const shard = Number(parts[2])
  if (!Number.isSafeInteger(window) || !Number.isInteger(shard)) return undefined
  if (shard < 0 || shard >= reserveShards) return undefined
  return { familyId: parts[0]!, window, shard }
}

/** Whether `e` is a keyed quota share of the coordinator's own part: its spending is written ahead. */
export function reservesSpend(e: Entry): boolean {
  return (
    e.client.clientId === centralClientId &&
    e.resource.shape.familyShare &&
    e.resource.settings.quotaWindow !== undefined
  )
}

/**
 * Raises what the coordinator's own part of `clientKey` holds reserved of keys of `familyId`
 * in `window` (never lowers it), to be written with the pool's next changes. False when it
 * holds no share of the family (nothing may be admitted then).
 */
export function reserveSpend(
  pool: PoolState,
  clientKey: string,
  familyId: string,
  window: number,
  keys: Iterable<readonly [string, number]>,
): boolean {
  const e = pool.clients.get(clientKey)?.entries.get(familyId)
  if (e === undefined || !reservesSpend(e)) return false
  const record = recordOf(pool, e, window)
  if (record.full) return true
  let dirty: Set<number> | undefined
  for (const [key, units] of keys)
    if (units > (record.keys.get(key) ?? 0)) {
      if (record.keys.size >= domainLimits.maxSpentKeys && !record.keys.has(key)) {
        fill(pool, e, record)
        return true
      }
      record.keys.set(key, units)
      if (pool.track) (dirty ??= dirtyShards(pool, e, window)).add(reserveShardOf(key))
    }
  return true
}

/**
 * The coordinator's own part of `clientKey` admitted more keys of `familyId` in `window` than a
 * release may say (`maxSpentKeys`): its reservations there say only that from now on (the share
 * of that window stays spent if it dies), and each key's count is dropped, in memory and in the
 * ledger. False when it holds no share of the family.
 */
export function reserveFull(
  pool: PoolState,
  clientKey: string,
  familyId: string,
  window: number,
): boolean {
  const e = pool.clients.get(clientKey)?.entries.get(familyId)
  if (e === undefined || !reservesSpend(e)) return false
  const record = recordOf(pool, e, window)
  if (!record.full) fill(pool, e, record)
  return true
}

/** `e`'s reservations of `window`, made if new (dropping those of windows no longer kept). */
function recordOf(pool: PoolState, e: Entry, window: number): SpendReserve {
  let record = e.reserved?.find((x) => x.window === window)
  if (record === undefined) {
    record = { window, keys: new Map() }
    const kept: SpendReserve[] = []
    for (const x of e.reserved ?? [])
      if (x.window > window - keptWindows) kept.push(x)
      else dropShards(pool, e, x)
    e.reserved = [...kept, record].sort((a, b) => a.window - b.window)
    // Its entry says it reserves (and in shards) with the first window's.
    pool.touch(e)
  }
  return record
}

/** Replaces `record` by a full one: its shards leave the ledger, its entry says the window is full. */
function fill(pool: PoolState, e: Entry, record: SpendReserve): void {
  // Its shards stay in the ledger until the window is dropped (the mark overrides them): removed
  // in the same write as the mark, a ledger that commits a write in parts (etcd, past its
  // operations a transaction) could keep the removals without the mark, and vouch for too few.
  pool.reserveDirty.get(e)?.delete(record.window)
  const full: SpendReserve = { window: record.window, keys: new Map(), full: true }
  e.reserved = e.reserved!.map((x) => (x === record ? full : x))
  pool.touch(e)
}

function dirtyShards(pool: PoolState, e: Entry, window: number): Set<number> {
  let windows = pool.reserveDirty.get(e)
  if (windows === undefined) pool.reserveDirty.set(e, (windows = new Map<number, Set<number>>()))
  let shards = windows.get(window)
  if (shards === undefined) windows.set(window, (shards = new Set()))
  return shards
}

/** Removes from the ledger the shards of `record` (a window no longer kept, or `e` gone). */
function dropShards(pool: PoolState, e: Entry, record: SpendReserve): void {
  pool.reserveDirty.get(e)?.delete(record.window)
  const shards = new Set<number>()
  // A full window's shards are those written before it filled: any of them.
  if (record.full === true) for (let i = 0; i < reserveShards; i++) shards.add(i)
  for (const key of record.keys.keys()) shards.add(reserveShardOf(key))
  const familyId = e.resource.settings.id
  for (const shard of shards)
    pool.gone({ clientKey: e.client.key, resource: reserveShardId(familyId, record.window, shard) })
}

/** Every shard of `e`'s reservations goes with the next write (restored from a ledger that kept them in the entry). */
export function rewriteReserved(pool: PoolState, e: Entry): void {
  if (!pool.track) return
  for (const x of e.reserved ?? [])
    for (const key of x.keys.keys()) dirtyShards(pool, e, x.window).add(reserveShardOf(key))
}

/** `e` leaves the pool (or is set aside): its shards of reservations leave the ledger with it. */
export function forgetReserved(pool: PoolState, e: Entry): void {
  if (!reservesSpend(e) || e.reserved === undefined) return
  for (const x of e.reserved) dropShards(pool, e, x)
  pool.reserveDirty.delete(e)
}

/**
 * `e`'s reservations of keys in `shards` of `window`, as the ledger keeps them: one entry per
 * shard (`reserveShardId`), without a write's stamp (they commit nothing).
 */
export function reserveShardEntries(
  e: Entry,
  window: number,
  shards: ReadonlySet<number> | undefined,
): LedgerEntry[] {
  const record = e.reserved?.find((x) => x.window === window)
  if (record === undefined) return []
  const keys = new Map<number, [string, number][]>()
  for (const [key, units] of record.keys) {
    const shard = reserveShardOf(key)
    if (shards !== undefined && !shards.has(shard)) continue
    let list = keys.get(shard)
    if (list === undefined) keys.set(shard, (list = []))
    list.push([key, units])
  }
  const { client } = e
  const familyId = e.resource.settings.id
  return [...keys].map(([shard, list]) => ({
    clientKey: client.key,
    clientId: client.clientId,
    tenant: client.tenant,
    instance: client.instance,
    resource: reserveShardId(familyId, window, shard),
    pinned: false,
    commitments: [],
    reserved: [{ window, keys: list }],
  }))
}

/**
 * What a dead central part of `client` spent, as a release says it (clients.ts, `release`):
 * for each keyed quota share it reserved spending of in the window in force, the share's spent
 * keys and its keys leased on their own with their units, and the resources to release. A
 * share it cannot vouch for stays spent to the window's end, as before: one that was handed a
 * leaver's share in the window (the leaver's spent keys are in no reservation), one holding a
 * block of the next window sent ahead while it reserved units of that window (the release
 * would free the block: a few hundred ms before each edge), one whose lease is of another
 * window, or one with more spent keys than a release may say.
 */
export function deadCentralSpent(
  pool: PoolState,
  client: ClientState,
  nowMs: number,
): { ids: string[]; spent: SpentReport[] } {
  const ids: string[] = []
  const spent: SpentReport[] = []
  for (const e of client.entries.values()) {
    if (!reservesSpend(e) || e.reserved === undefined || e.vacancy !== undefined) continue
    promoteDue(pool, e, nowMs)
    const w = pool.windowOf(e.resource, nowMs)?.index
    if (w === undefined || e.leaseWindow !== w) continue
    if (e.inheritedWindow === w || e.inherit?.window === w) continue
    // Reserved of the next window (ahead of its first checks, or spent by a check between the
    // two) while a block of it sent ahead is held: the release would free that block.
    const aheadSpent = e.reserved.some(
      (x) => x.window > w && (x.full === true || [...x.keys.values()].some((n) => n > 0)),
    )
    if (aheadSpent && e.ahead !== undefined && e.ahead.window > w) continue
    const record = e.reserved.find((x) => x.window === w)
    // More keys than a release may say.
    if (record?.full === true) continue
    const units = record?.keys
    const family = e.resource.settings.family!
    const hotIds: string[] = []
    const hotSpent: SpentReport[] = []
    const hot = new Set<string>()
    let vouches = true
    for (const h of client.entries.values()) {
      if (!h.resource.shape.hotKey || h.resource.settings.family?.familyId !== family.familyId)
        continue
      const id = h.resource.settings.id
      const key = keyOfId(family.prefix, id)
      promoteDue(pool, h, nowMs)
      if (key === undefined || h.leaseWindow !== w) continue
      if (aheadSpent && h.ahead !== undefined && h.ahead.window > w) vouches = false
      hot.add(key)
      hotIds.push(id)
      hotSpent.push({ resource: id, window: w, used: units?.get(key) ?? 0 })
    }
    const keys: [string, number][] = []
    for (const [key, n] of units ?? []) if (n > 0 && !hot.has(key)) keys.push([key, n])
    if (!vouches || keys.length > domainLimits.maxSpentKeys) continue
    ids.push(family.familyId, ...hotIds)
    spent.push({ resource: family.familyId, window: w, keys }, ...hotSpent)
  }
  return { ids, spent }
}
