import type { Entry } from '../entry.js'
import { demandOf } from '../hot-keys.js'
import { maxMinTargets } from './max-min.js'
import { settle, type Shape } from './shape.js'

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
    // A process the coordinator's own part decides for (a crowded family, default-holders.ts)
    // holds none of the key, not even the surplus: the key's capacity stays where it is asked.
    // Looked up only in a crowded family (its last round said so): most rounds of most keys
    // scan nothing more.
    const familyId = r.settings.family!.familyId
    let sharers: readonly Entry[] = sharing
    if (pool.resources.get(familyId)?.crowded === true) {
      sharers = sharing.filter((e) => e.client.entries.get(familyId)?.decidedCentrally !== true)
      if (sharers.length < sharing.length) for (const e of sharing as Entry[]) e.target = 0
      else sharers = sharing
    }
    for (const e of sharers) {
      const d = demandOf(e, nowMs)
      if (d > 0) asked = true
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
    if (asked)
      for (const e of sharing as Entry[])
        if (e.reportedMs < e.seededMs && nowMs - e.seededMs < r.settings.refreshMs)
          e.target = Math.max(e.target, e.newest)
    settle(pool, r, sharing, nowMs)
  },
})
