import { domainLimits, keyOfId } from '../../shared/index.js'
import { promoteDue } from './ahead.js'
import type { SpentReport } from './clients.js'
import type { ClientState, Entry } from './entry.js'
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
  let record = e.reserved?.find((x) => x.window === window)
  if (record === undefined) {
    record = { window, keys: new Map() }
    const kept = (e.reserved ?? []).filter((x) => x.window > window - keptWindows)
    e.reserved = [...kept, record].sort((a, b) => a.window - b.window)
  }
  for (const [key, units] of keys)
    if (units > (record.keys.get(key) ?? 0)) record.keys.set(key, units)
  pool.touch(e)
  return true
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
      (x) => x.window > w && [...x.keys.values()].some((n) => n > 0),
    )
    if (aheadSpent && e.ahead !== undefined && e.ahead.window > w) continue
    const units = e.reserved.find((x) => x.window === w)?.keys
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
