import { randomUUID } from 'node:crypto'
import { leaseTtlMsAt } from '../config/index.js'
import type { LedgerChange, LedgerEntry, LedgerStamp } from '../ledger/index.js'
import { ClientState, noWindow, type Entry, type LeaseRecord } from './entry.js'
import {
  parseReserveShardId,
  reserveShardEntries,
  reservesSpend,
  rewriteReserved,
} from './central-spend.js'
import { subscribe } from './registry.js'
import type { PoolState } from './state.js'

/**
 * The pool as the ledger keeps it: what changed since the last write
 * (`takeChanges`), every entry (`ledgerEntries`, a compaction's snapshot),
 * and a pool filled back from a ledger's entries (`restoreEntries`). Times
 * are the ledger's, wall-clock ms, through the conversions given.
 */

/**
 * What changed since the last call, as the ledger keeps it (wall-clock
 * times through `toWallMs`): each changed entry's leases, or its removal.
 */
export function takeChanges(
  pool: PoolState,
  toWallMs: (monoMs: number) => number,
  /** The write's stamp, put on every entry (made here, not spread onto a copy: one object per entry). */
  stamp: LedgerStamp = {},
): LedgerChange[] {
  const changes: LedgerChange[] = []
  for (const removed of pool.removed.splice(0)) changes.push({ remove: removed })
  for (const e of pool.dirty) {
    if (e.client.entries.get(e.resource.settings.id) !== e) continue
    if (!e.ledgered && unrecorded(e)) continue
    e.ledgered = true
    changes.push({ put: ledgerEntry(e, toWallMs, stamp) })
  }
  pool.dirty.clear()
  // The shards of the coordinator's part's reservations raised since (central-spend.ts).
  for (const [e, windows] of pool.reserveDirty) {
    if (e.client.entries.get(e.resource.settings.id) !== e || !reservesSpend(e)) continue
    for (const [window, shards] of windows)
      for (const put of reserveShardEntries(e, window, shards)) changes.push({ put })
  }
  pool.reserveDirty.clear()
  return changes
}

/**
 * Every entry as the ledger keeps it: what a ledger that has applied every
 * `takeChanges` so far holds, with what has changed since (and is not yet
 * taken) already in. A ledger compacting takes its snapshot from here
 * instead of keeping a copy of every entry (`Ledger.snapshotFrom`): what it
 * holds is then newer, never less than what was sent (a lease is sent once
 * the write that covers it is done, and the pool drops a lease only once it
 * no longer counts).
 */
export function ledgerEntries(
  pool: PoolState,
  toWallMs: (monoMs: number) => number,
  stamp: LedgerStamp = {},
): LedgerEntry[] {
  const entries: LedgerEntry[] = []
  for (const client of pool.clients.values())
    for (const e of client.entries.values()) {
      if (!e.ledgered && unrecorded(e)) continue
      // In the file from now (its removal, once it goes, is written too).
      e.ledgered = true
      entries.push(ledgerEntry(e, toWallMs, stamp))
      if (reservesSpend(e))
        for (const x of e.reserved ?? [])
          entries.push(...reserveShardEntries(e, x.window, undefined))
    }
  return entries
}

/**
 * Whether `e` needs no record in the ledger: a hot key's entry (a keyed family's, rate or
 * quota) whose every lease is of 0 (capacity and fallback), with nothing else a record would
 * say (not pinned, no use reported, no block ahead, nothing inherited). A family's holders get
 * one for each hot key they hold nothing of with their first family lease (lease-out.ts,
 * `withFamilyLease`; a keyed quota's at each window's), and one whenever a round cuts them to 0;
 * such entries go idle soon after (hot-keys.ts, `idleKey`). Over 30 gateways a keyed quota had
 * ~4,000 of them at each edge, written three times (about 4 MB) and removed again, 60% of the
 * ledger's bytes (#41: its edges refused everything for seconds after a coordinator restart,
 * its writes taking 2–3.4 s). A crowded rate family (8 processes, 10,000 keys, the keyed fault
 * run) had tens of thousands: after a coordinator restart, with every hot key's lease sent
 * again on each process's new connection, its writes grew to 11–25 MB a line, 0.5–1.5 s each,
 * 130 MB in the 15 s after the restart against 1.7 MB before it; the shortened batches held
 * the hot keys at a fifth of their rate in 1 run of 3.
 *
 * Safe unwritten: a restored pool that does not know such an entry counts its client as holding
 * nothing of the key by it, which is what it holds (a client never goes back from a key's own
 * lease to its default share by time: a lease of 0 ends in a fallback of 0, then 0). What keeps
 * a new holder off its default share of a hot key, the lease of 0, travels in the same batch as
 * its first family lease (of the window, for a quota); a client that never got that batch holds
 * no share at all, and its next family lease carries the 0 again (`again`), for every hot key
 * the restored pool knows. A key seeded from a share (hot-keys.ts, `seedKey`) starts above 0 and
 * is written; once written, an entry is written (and removed) as any, whatever it holds later:
 * so a restored pool knows every hot key some holder held more than 0 of, and tells each of its
 * holders when it goes cold (removing such records once they hold 0 would let a restart forget
 * a key on its way to cold, whose holders then keep their 0 of it).
 */
export function unrecorded(e: Entry): boolean {
  if (!e.resource.shape.hotKey) return false
  if (e.pinned || e.usedWindow !== noWindow || e.ahead !== undefined) return false
  if (e.inherit !== undefined || e.inheritedWindow !== noWindow || reservesSpend(e)) return false
  for (const l of e.leases) if (l.capacity !== 0 || l.fallback !== 0) return false
  return true
}

function ledgerEntry(
  e: Entry,
  toWallMs: (monoMs: number) => number,
  stamp: LedgerStamp,
): LedgerEntry {
  const { client, resource } = e
  return {
    clientKey: client.key,
    clientId: client.clientId,
    tenant: client.tenant,
    instance: client.instance,
    resource: resource.settings.id,
    pinned: e.pinned,
    commitments: e.leases.map((l) => ({
      // A lease that lapsed while its client was away counts only as its fallback.
      capacity: l.lapsed ? l.fallback : l.capacity,
      untilMs: Math.ceil(toWallMs(l.holdUntilMs)),
      fallback: l.fallback,
      fallbackUntilMs: Math.ceil(toWallMs(l.fallbackUntilMs)),
      // Restored as such: a restart that finds its client away does not hold it anew (model,
      // seed 1975823762: a slot that lapsed at a reconnect counted again at a second restart).
      ...(l.lapsed ? { lapsed: true as const } : {}),
    })),
    writtenMs: stamp.writtenMs,
    writtenMono: stamp.writtenMono,
    epoch: stamp.epoch,
    ...(stamp.windowLagMs === undefined ? {} : { windowLagMs: stamp.windowLagMs }),
    ...(stamp.writeLatencyMs === undefined ? {} : { writeLatencyMs: stamp.writeLatencyMs }),
    // A quota's use as reported: a restarted coordinator shows it at once (other kinds'
    // entries, by the thousand in a family, carry no field for it).
    ...(e.usedWindow !== noWindow
      ? {
          used: {
            window: e.usedWindow,
            units: e.used,
            // What a reset may not give back (reset.ts): written with the count it is part of.
            ...(e.charged > 0 ? { charged: e.charged } : {}),
          },
        }
      : {}),
    // The window of the lease: a restore takes it as of that window, not the wall clock's.
    ...(e.leaseWindow !== noWindow ? { leaseWindow: e.leaseWindow } : {}),
    ...(e.inherit === undefined
      ? {}
      : { inherit: { window: e.inherit.window, keys: e.inherit.keys, id: e.inherit.id } }),
    // The coordinator's own part's spending written ahead (central-spend.ts), in shards of
    // their own; neither this nor `reserved` marks a ledger of a part that did not write it
    // (its share stays spent).
    ...(reservesSpend(e) && e.reserved !== undefined ? { reservedIn: 'shards' as const } : {}),
    // Windows it admitted more keys of than its reservations name (central-spend.ts).
    ...(reservesSpend(e) && e.reserved?.some((x) => x.full === true)
      ? { reservedFull: e.reserved.filter((x) => x.full === true).map((x) => x.window) }
      : {}),
    // A keyed quota share handed a leaver's (handover.ts): its spent keys count here.
    ...(e.inheritedWindow !== noWindow ? { inheritedWindow: e.inheritedWindow } : {}),
    // A named quota's block of the next window sent ahead (ahead.ts): written before it is sent.
    ...(e.ahead === undefined
      ? {}
      : {
          ahead: {
            window: e.ahead.window,
            capacity: e.ahead.capacity,
            startMs: Math.floor(toWallMs(e.ahead.startMs)),
            endMs: Math.ceil(toWallMs(e.ahead.endMs)),
            untilMs: Math.ceil(toWallMs(e.ahead.holdUntilMs)),
          },
        }),
  }
}

/**
 * Fills the pool from what a ledger kept: each client as disconnected (it
 * will reconnect, or its leases lapse), each lease as committed until its
 * wall time (through `toMonoMs`), of the window the ledger says. Concurrency
 * slots counted while connected count a whole lease life from now: they may
 * still be in flight. Returns the entries restored.
 */
export function restoreEntries(
  pool: PoolState,
  entries: readonly LedgerEntry[],
  toMonoMs: (wallMs: number, entry: LedgerEntry) => number,
  nowMs: number,
): Entry[] {
  const restored: Entry[] = []
  const shards: [LedgerEntry, string][] = []
  for (const le of entries) {
    const shard = parseReserveShardId(le.resource)
    if (shard !== undefined) {
      shards.push([le, shard.familyId])
      continue
    }
    const settings = pool.settingsFor(le.resource)
    if (settings === undefined) continue
    let client = pool.clients.get(le.clientKey)
    if (client === undefined) {
      client = new ClientState(le.clientKey, le.clientId, le.tenant, le.instance)
      client.connected = false
      pool.clients.set(le.clientKey, client)
    }
    const entry = subscribe(pool, client, le.resource, settings)
    entry.ledgered = true
    const records: LeaseRecord[] = le.commitments.map((c) => ({
      seq: 0,
      capacity: c.capacity,
      ttlMs: leaseTtlMsAt(settings, nowMs),
      sentMs: nowMs,
      holdUntilMs: toMonoMs(c.untilMs, le),
      fallback: c.fallback,
      fallbackUntilMs: toMonoMs(c.fallbackUntilMs, le),
      acked: true,
      lapsed: c.lapsed === true,
    }))
    entry.restore(records, nowMs)
    if (le.used !== undefined) {
      entry.used = le.used.units
      entry.usedWindow = le.used.window
      entry.charged = Math.min(le.used.charged ?? 0, le.used.units)
    }
    // A quota's lease is of the window the ledger says it was leased in. (A ledger of an
    // earlier version says none: a lease held past the middle of the window in force is taken
    // as of that window, a lease of the one before holding only until its end.)
    const w = pool.windowOf(entry.resource, nowMs)
    if (w !== undefined) {
      if (le.leaseWindow !== undefined) entry.leaseWindow = le.leaseWindow
      else if (records.some((l) => l.holdUntilMs >= (w.startMs + w.endMs) / 2))
        entry.leaseWindow = w.index
    }
    if (le.inherit !== undefined)
      entry.inherit = {
        window: le.inherit.window,
        keys: [...le.inherit.keys],
        fromSeq: Infinity,
        // A ledger of before ids: one of its own (the client has not seen it under this one).
        id: le.inherit.id ?? randomUUID(),
      }
    // In shards (reservedIn), or in the entry (a ledger of an earlier version), or not at all.
    if (reservesSpend(entry))
      entry.reserved =
        le.reservedIn === 'shards'
          ? []
          : le.reserved?.map((x) => ({ window: x.window, keys: new Map(x.keys) }))
    if (entry.reserved !== undefined)
      for (const window of le.reservedFull ?? [])
        entry.reserved = [
          ...entry.reserved.filter((x) => x.window !== window),
          { window, keys: new Map<string, number>(), full: true as const },
        ].sort((a, b) => a.window - b.window)
    // Written again in shards, before the entry says they are there.
    if (reservesSpend(entry) && le.reservedIn !== 'shards') rewriteReserved(pool, entry)
    if (le.inheritedWindow !== undefined) entry.inheritedWindow = le.inheritedWindow
    if (le.ahead !== undefined)
      entry.ahead = {
        window: le.ahead.window,
        capacity: le.ahead.capacity,
        startMs: toMonoMs(le.ahead.startMs, le),
        endMs: toMonoMs(le.ahead.endMs, le),
        holdUntilMs: toMonoMs(le.ahead.untilMs, le),
      }
    if (le.pinned) entry.disconnected(nowMs)
    entry.refresh(nowMs)
    pool.touch(entry)
    restored.push(entry)
  }
  for (const [le, familyId] of shards) {
    const e = pool.clients.get(le.clientKey)?.entries.get(familyId)
    if (e === undefined || !reservesSpend(e) || e.reserved === undefined) {
      // Its share is gone (or did not say it reserves): the shard goes with it.
      pool.gone({ clientKey: le.clientKey, resource: le.resource })
      continue
    }
    for (const x of le.reserved ?? []) mergeReserved(e, x.window, x.keys)
  }
  return restored
}

/** Adds a shard's counts to `e`'s reservations of `window` (the larger of two counts of a key). */
function mergeReserved(e: Entry, window: number, keys: readonly (readonly [string, number])[]) {
  let record = e.reserved!.find((x) => x.window === window)
  if (record?.full === true) return
  if (record === undefined) {
    record = { window, keys: new Map() }
    e.reserved = [...e.reserved!, record].sort((a, b) => a.window - b.window)
  }
  for (const [key, units] of keys)
    if (units > (record.keys.get(key) ?? 0)) record.keys.set(key, units)
}
