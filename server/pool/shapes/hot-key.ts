import { kindTraits } from '../../../shared/index.js'
import type { Entry, ResourceState } from '../entry.js'
import { subscribe } from '../registry.js'
import type { PoolState } from '../state.js'
import { demandOf } from '../hot-keys.js'
import { send } from '../lease-out.js'
import { centralClientId, decidedCentrally } from './default-holders.js'
import { maxMinTargets } from './max-min.js'
import { settle, type Shape } from './shape.js'

/**
 * How long after its seed a holder that never asked for a key has said so (its ack and report
 * come together, a round trip after the seed left): a round of the key that comes sooner (a
 * prompt round with no debounce) leaves the asker's seed saying `rising`; one that comes later
 * (the prompt round after the default 20 ms debounce) decides it.
 */
const seedAnswerMs = 10

/**
 * One hot key of a rate or concurrency family, shared by weighted max-min
 * over what its holders ask for now; a holder that does not (it never did,
 * or stopped: not reported lately) asks for nothing, but keeps its part of
 * the surplus (surplus `spread`), so its first check of the key is decided
 * at once as it was under the default share. Once nobody asks for the key
 * (and no silent holder holds any of it), every holder gets nothing of it,
 * so what was spread goes back and the key goes cold (hot-keys.ts). A share below one token of burst goes whole to a
 * few (`wholeTokens`).
 */
export const hotKeyShape: Shape = Object.freeze<Shape>({
  name: 'hot key',
  familyShare: false,
  hotKey: true,
  nextBlocks: undefined,
  round(pool, r, sharing, reserved, nowMs) {
    const wants: number[] = []
    let asked = false
    let askers = 0
    // A process the coordinator's own part decides for (a crowded family, default-holders.ts)
    // holds none of the key, not even the surplus: the key's capacity stays where it is asked.
    // Looked up only in a crowded family (its last round said so): most rounds of most keys
    // scan nothing more.
    const familyId = r.settings.family!.familyId
    let sharers: readonly Entry[] = sharing
    // What the processes it decides for asked of the key, as they last reported it (by
    // tenant: each tenant has a part of its own): the coordinator's part asks that much at least.
    let standsFor: Map<string | undefined, number> | undefined
    const family = pool.resources.get(familyId)
    if (family?.crowded === true) {
      const local: Entry[] = []
      for (const e of sharing as Entry[]) {
        if (!decidedCentrally(e, familyId)) {
          local.push(e)
          continue
        }
        const d = demandOf(e, nowMs)
        if (d > 0)
          (standsFor ??= new Map()).set(e.client.tenant, (standsFor.get(e.client.tenant) ?? 0) + d)
      }
      if (local.length < sharing.length) {
        for (const e of sharing as Entry[]) e.target = 0
        sharers =
          standsFor === undefined
            ? local
            : withCentral(pool, r, family, sharing as Entry[], local, standsFor)
      }
    }
    for (const e of sharers) {
      let d = demandOf(e, nowMs)
      // A key hot by the reports of processes the coordinator's part now decides for (they
      // checked it on a default share, or a share of the key, before the family was crowded):
      // that part asks what they asked until its own report says more. Asked by nobody else,
      // the key would be held by nobody until that part's next report (#41: 30 gateways
      // starting together left keys of rank 1-9 unheld for 0.8 s).
      if (standsFor !== undefined && e.client.clientId === centralClientId)
        d = Math.max(d, standsFor.get(e.client.tenant) ?? 0)
      if (d > 0) {
        asked = true
        askers++
      }
      wants.push(d)
    }
    // Nobody asks: nothing for anyone, so the key goes cold once that is acknowledged. But while
    // a silent holder still holds some (cut off: counted until it lapses), the key cannot go cold
    // anyway, and the rest stays spread, or a gateway's first check of it would be refused all
    // the while (#41).
    if (asked || reserved > 0) maxMinTargets(r, sharers, wants, reserved, { wholeTokens: true })
    else for (const e of sharers as Entry[]) e.target = 0
    // A key just gone hot (someone else asked first: another process, or the coordinator's own
    // part for a remote decision): a holder that has not reported it since keeps the lease it
    // was seeded with until it does, or for a refresh period, as a quota key's holder does
    // (named-quota.ts): cut at once, its bucket would lose what its default share still held.
    r.seedsHeld = false
    let seedsJustSent = false
    if (asked)
      for (const e of sharing as Entry[])
        if (e.reportedMs < e.seededMs && nowMs - e.seededMs < r.settings.refreshMs) {
          e.target = Math.max(e.target, e.newest)
          r.seedsHeld = true
          if (nowMs - e.seededMs < seedAnswerMs) seedsJustSent = true
        }
    // A rate key's holder that never held any of it waits for its first part (a process that
    // joined): the falls made for it say `handOn`, so their holders give up what the slices
    // that fell held, and its rise starts with that (clients.ts `noteGiven`), not empty. Only
    // then: a fall nobody rises for keeps its excess going where it is (#41, "a 6th joins").
    // And where one holder alone asks for the key (its traffic concentrated there) and rises, a
    // holder cut to 0 that never asked for it since it went hot gives up what it held of it for
    // that rise (lease-out.ts): it would keep its excess going where nobody spends it.
    const refills = kindTraits[r.settings.kind].refills
    r.handOnFalls = refills && sharing.some((e) => !e.everHeld && e.target > e.newest + r.epsilon)
    r.handOnToZero = refills && askers === 1 && sharing.some((e) => e.target > e.newest + r.epsilon)
    // The seed to the holder whose report made the key hot said a rise may come (lease-out.ts,
    // `rising`): once the holders seeded with it have had time to say that they never asked for
    // the key (each does at once, right behind its ack, client/keyed/family.ts), its leases say
    // whether one is on its way. A seed kept past that is a holder that asked for the key and
    // says so at its next report: the rise, if any, waits for that, and nobody waits for it.
    if (!seedsJustSent) for (const e of sharing) e.riseAsked = false
    settle(pool, r, sharing, nowMs)
    r.handOnFalls = false
    r.handOnToZero = false
    // A holder told a rise was on its way that this round gives none (and sent nothing): told
    // so, or its checks would wait for a lease that is not coming (`risingWaitMs`, a second).
    for (const e of sharing)
      if (e.saidRising && !e.riseAsked && (r.seedsHeld || !(e.target > e.newest + r.epsilon)))
        send(pool, e, e.newest, nowMs)
  },
})

/**
 * `sharers` with the coordinator's part of each tenant in `standsFor` that holds the family (a
 * crowded family's processes it decides for asked for the key), subscribed to the key if it
 * was not (the key went hot before it held the family, or its entry went idle): added to
 * `sharing` too, so the round settles it. An entry holds nothing until it is granted some out
 * of what is free.
 */
function withCentral(
  pool: PoolState,
  r: ResourceState,
  family: ResourceState,
  sharing: Entry[],
  sharers: readonly Entry[],
  standsFor: ReadonlyMap<string | undefined, number>,
): readonly Entry[] {
  let added: Entry[] | undefined
  for (const fe of family.entries.values()) {
    if (fe.client.clientId !== centralClientId || !fe.client.connected) continue
    if (!standsFor.has(fe.client.tenant) || fe.client.entries.has(r.settings.id)) continue
    const entry = subscribe(pool, fe.client, r.settings.id, r.settings)
    sharing.push(entry)
    ;(added ??= []).push(entry)
  }
  return added === undefined ? sharers : [...sharers, ...added]
}
