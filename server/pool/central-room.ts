import { centralSpentOf } from './central-spend.js'
import { release } from './clients.js'
import type { Entry, ResourceState } from './entry.js'
import { centralClientId } from './shapes/index.js'
import type { PoolState } from './state.js'

/**
 * The room of an uncrowded keyed quota, held by the coordinator's own part.
 *
 * A keyed quota's shares keep room for one holder more (keyed-quota-share.ts): a process that
 * comes mid-window (a deploy, a scale-up) then decides new keys at once. Kept free, nobody
 * could spend that room: a customer's burst of 100 over three gateways after a rolling deploy
 * found only the gateways' shares, 83–91 of 100, the rest refused by the coordinator's part
 * too, which held nothing (#41). So where the coordinator's part is asked (remote decisions),
 * it holds the room (`roomTarget`), and decides from it what the shares cannot, as one central
 * limiter would; when a process joins and what is free does not make its part, the part lets
 * the room go (`letGoRoom`): it stops admitting from it at once, and the share is handed on to
 * the joiner with what the part spent of each key, as a process that closes cleanly hands its
 * share on (handover.ts). What it spent is known exactly: it admits nothing it has not first
 * reserved (central-spend.ts). A share it cannot vouch for (more keys than a release may say,
 * a handover of its own pending, a block of the next window held) stays with it, and the
 * joiner asks the part for what its share cannot decide, as before.
 */

/** What the coordinator's part of an uncrowded keyed quota may hold: one holder's room. */
export function roomTarget(
  pool: PoolState,
  r: ResourceState,
  e: Entry,
  room: number,
  windowIndex: number,
): number {
  if (pool.letGoCentral === undefined || r.crowded || e.client.clientId !== centralClientId)
    return 0
  // A share of an earlier window is none of this one; one whose room went stays as it is.
  return Math.max(e.leaseWindow === windowIndex ? e.newest : 0, room)
}

/**
 * Whether the coordinator's part let its room of `r` go for a process that joined: a default
 * holder (`defaults`) that holds nothing of this window, more of them than vacancies waiting for
 * an heir, and less free than the part holds. Call before the round hands vacancies on.
 */
export function letGoRoom(
  pool: PoolState,
  r: ResourceState,
  sharing: readonly Entry[],
  defaults: readonly number[],
  windowIndex: number,
  nowMs: number,
): boolean {
  const letGo = pool.letGoCentral
  if (letGo === undefined || r.crowded) return false
  const eps = r.epsilon
  const part = sharing.find(
    (e) =>
      e.client.clientId === centralClientId &&
      e.leaseWindow === windowIndex &&
      e.newest > eps &&
      e.client.connected,
  )
  if (part === undefined) return false
  let joiners = 0
  for (let i = 0; i < sharing.length; i++) {
    const e = sharing[i]!
    if (e === part || defaults[i]! <= 0) continue
    if (e.leaseWindow !== windowIndex || e.newest <= eps) joiners++
  }
  if (joiners === 0) return false
  let waiting = 0
  for (const e of r.entries.values())
    if (e.vacancy?.window === windowIndex && e.vacancy.heir === undefined) waiting++
  if (joiners <= waiting) return false
  // What nobody holds makes a joiner's part: it takes that (the round's increases).
  const whole = r.settings.family!.defaultShare ?? 1
  if (whole - r.committedSum >= part.newest - eps) return false
  // Every lease of the share and of its keys acknowledged: none is on its way to the part,
  // where its next handle of the family would put it in force.
  const client = part.client
  const familyId = r.settings.id
  for (const e of client.entries.values()) {
    const ofFamily = e === part || e.resource.settings.family?.familyId === familyId
    if (ofFamily && !e.leases.every((l) => l.acked)) return false
  }
  const said = centralSpentOf(pool, client, part, nowMs)
  if (said === undefined) return false
  // The part admits nothing more of the share from here (synchronously: nothing of it is
  // decided between the count of what it spent and the release).
  letGo(client.tenant, familyId)
  for (const e of release(pool, client.key, said.ids, nowMs, said.spent))
    if (e.vacancy !== undefined) e.vacancy.anyHeir = true
  return true
}
