import type { Entry, ResourceState } from './entry.js'
import { send } from './lease-out.js'
import { unsubscribe } from './registry.js'
import { centralClientId } from './shapes/index.js'
import type { PoolState } from './state.js'

/**
 * A keyed quota's share handed on. A share sent in a window is spent of
 * every key until the window ends, whatever becomes of its holder
 * (keyed-quota-share.ts): a process cannot be asked what it spent of a
 * million keys. But one that closes cleanly can say it: its release names
 * every key it spent of by its default share in the window, and how much
 * (at most `maxSpentKeys`). Its share, set aside as before, is then a
 * vacancy: a round hands it whole to one holder that shares (the heir), in
 * a lease whose capacity adds it and that carries the spent keys
 * (`inherit`); that client counts those units as spent by itself, so of
 * every key it may spend at most (its share + the vacancy) × the key's
 * budget less what the leaver spent. Every later lease of the heir
 * carries the spent keys too, until it acknowledges one (`pendingInherit`),
 * and they are in the ledger with its entry: a lease that counts the share
 * never reaches the heir without them, whatever is lost or restarted.
 *
 * The vacancy itself counts on until the heir has acknowledged (both count
 * in between, so a key that goes hot meanwhile is seeded from both: the
 * heir may not yet count the leaver's units of it). Found by the keyed
 * quota model, twice: a handover lease lost, the next lease counted the
 * share without the keys; and a key gone hot while the handover was
 * pending, leased to the heir whole (13 of 12 both times).
 *
 * Safe whatever is lost or repeated: a vacancy whose heir never
 * acknowledges stays to the window's end; a vacancy's own spent keys are
 * not in the ledger, so after a restart it is a spent share again; a batch
 * that replaces a lease keeps them (batches.ts). Counted once: each
 * vacancy has an id (random, so no client can name another's, and none
 * repeats across a restart), a client counts each id once in a window
 * however often it is told, and a holder is handed one vacancy at a time
 * (the next once it acknowledged the last). Counted twice, the spent keys
 * made the client report more used than was admitted, and a key reset
 * (reset.ts) gave that back: found by the keyed quota model, 2 given back
 * of 1 admitted.
 */

/** What a released share spent of each key in its window: it may be handed on. */
export interface Vacancy {
  readonly window: number
  readonly keys: readonly (readonly [string, number])[]
  /** When it was released (a newcomer may take it for a while first). */
  readonly sinceMs: number
  /** Its id: a client counts a handover once, however often told (random: no client can name it). */
  readonly id: string
  /** The holder it was handed to, until that one acknowledges. */
  heir?: Entry | undefined
}

/**
 * How long a vacancy waits for a holder that has nothing yet, in refresh periods: in a rolling
 * deploy the replacement comes within a second or so, and takes its predecessor's share, so
 * the shares stay as even as before (and the room kept for one more stays free).
 */
const patienceRefreshes = 3

/** Most keys a holder may be told are spent by others in one window (a bound on its memory). */
const maxInheritedKeys = 16_384

/**
 * The vacancies of `r` in window `windowIndex` go on, each whole to the holder of `sharing`
 * with the smallest share (of the leaver's tenant first), one per holder per round: at once
 * to one that holds nothing yet (a process that just came, in a rolling deploy), else after
 * `patienceRefreshes`. One whose heir has acknowledged leaves the pool.
 */
export function handOver(
  pool: PoolState,
  r: ResourceState,
  sharing: readonly Entry[],
  windowIndex: number,
  nowMs: number,
): void {
  let taken: Set<Entry> | undefined
  for (const e of [...r.entries.values()]) {
    const v = e.vacancy
    if (v === undefined) continue
    if (v.window !== windowIndex || e.leaseWindow !== windowIndex) {
      e.vacancy = undefined // of a window gone: its leases lapse with it
      continue
    }
    if (v.heir !== undefined) {
      if (inherited(v.heir, windowIndex, v.id)) unsubscribe(pool, e)
      continue
    }
    const heir = heirOf(sharing, (taken ??= new Set()), e, windowIndex, v.keys.length)
    if (heir === undefined) continue
    const patient = nowMs - v.sinceMs < patienceRefreshes * r.settings.refreshMs
    if (patient && heir.newest > r.epsilon) continue
    taken.add(heir)
    heir.inheritedKeys += v.keys.length
    v.heir = heir
    heir.inherit = {
      window: windowIndex,
      keys: v.keys.map(([k, n]): [string, number] => [k, n]),
      // Only a lease that carries them settles them.
      fromSeq: Infinity,
      id: v.id,
    }
    send(pool, heir, heir.newest + e.committed, nowMs)
  }
}

/**
 * Whether `heir` has acknowledged a lease that carried what it was handed (vacancy `id`, or
 * its pending one): it is settled.
 */
function inherited(heir: Entry, windowIndex: number, id?: string): boolean {
  const inherit = heir.inherit
  if (inherit === undefined || inherit.window !== windowIndex) return true
  // Handed another since: this one was settled first (one at a time).
  if (id !== undefined && inherit.id !== id) return true
  if (!heir.leases.some((l) => l.acked && l.seq >= inherit.fromSeq)) return false
  heir.inherit = undefined
  return true
}

/**
 * What a holder was handed (`inherit`) goes with each lease it is sent from then on (and is
 * in the ledger with it) until it acknowledges one of them: a lease that carried it lost, or
 * a coordinator restarted, the next lease, which counts the share handed on, still says which
 * keys come spent with it. Called before each lease of a keyed quota share; returns what the
 * lease carries.
 */
export function pendingInherit(
  entry: Entry,
  windowIndex: number,
  seq: number,
): { window: number; keys: [string, number][]; id: string } | undefined {
  if (entry.inherit === undefined || inherited(entry, windowIndex)) {
    entry.inherit = undefined
    return undefined
  }
  const inherit = entry.inherit
  if (seq < inherit.fromSeq) inherit.fromSeq = seq
  return { window: inherit.window, keys: inherit.keys.map(([k, n]) => [k, n]), id: inherit.id }
}

/**
 * The holder to hand `vacancy` to: sharing, of this window, free, not decided for by the
 * coordinator's part, smallest share first.
 */
function heirOf(
  sharing: readonly Entry[],
  taken: ReadonlySet<Entry>,
  vacancy: Entry,
  windowIndex: number,
  keys: number,
): Entry | undefined {
  let best: Entry | undefined
  let bestRank = Infinity
  for (const e of sharing) {
    // Holding this window's share, or nothing yet (what it holds of an earlier window is no
    // share of this one).
    const fresh = e.leases.length === 0 && e.newest === 0
    if (taken.has(e) || !e.client.connected || !(fresh || e.leaseWindow === windowIndex)) continue
    // One the coordinator's part decides for (a crowded family, as its last round found) holds
    // no default share: handed one, it would decide locally what the part decides for the
    // others (a dead part's share, central-spend.ts, went to a gateway, not to the new part).
    if (e.decidedCentrally) continue
    // A dead coordinator's part's share goes to the new part only: it stands for the processes
    // the part decided for. Right after a restart no flag says so yet (the processes' restored
    // entries say nothing of how they check), and the share went to a gateway that asked the
    // coordinator for every check; carried into each next window as the split it ended with,
    // the new part held nothing of the family for 50 s (#41, the keyed quota over 30 gateways).
    if (vacancy.client.clientId === centralClientId && e.client.clientId !== centralClientId)
      continue
    // One handover at a time: the next once it acknowledged the last.
    if (e.inherit !== undefined && !inherited(e, windowIndex)) continue
    if (e.inheritedWindow !== windowIndex) {
      e.inheritedWindow = windowIndex
      e.inheritedKeys = 0
    }
    if (e.inheritedKeys + keys > maxInheritedKeys) continue
    // Of the leaver's tenant first, then the smallest share.
    const rank = (e.client.tenant === vacancy.client.tenant ? 0 : 2) + e.newest
    if (rank < bestRank) {
      best = e
      bestRank = rank
    }
  }
  return best
}

/**
 * Units of `key` that `entry` was handed as spent and may not have heard of yet (its
 * handover not acknowledged), in the window in force: a hot key seeded from its share counts
 * them out (hot-keys.ts).
 */
export function inheritedCharge(
  entry: Entry,
  key: string,
  window: { readonly index: number } | undefined,
): number {
  const inherit = entry.inherit
  if (inherit === undefined || window === undefined || inherit.window !== window.index) return 0
  return unitsOf(inherit.keys, key)
}

/** Units of `key` in a list of spent keys (a release's, a handover's): 0 when it is not named. */
export function unitsOf(keys: readonly (readonly [string, number])[], key: string): number {
  let units = 0
  for (const [k, n] of keys) if (k === key) units += n
  return units
}
