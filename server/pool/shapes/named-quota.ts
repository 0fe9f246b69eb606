import { allocate, wholeUnits, type ClientDemand } from '../../allocation/index.js'
import { quotaHorizonMs, wholeSlots } from '../../../shared/index.js'
import { arrivalAllowance } from '../arrival-noise.js'
import { promoteDue } from '../ahead.js'
import { elsewhere, send } from '../lease-out.js'
import { settleReset } from '../reset.js'
import type { Entry, ResourceState } from '../entry.js'
import { centralClientId, decidedCentrally } from './default-holders.js'
import { settle, tenantOf, type Shape } from './shape.js'

/** A key's holder hears what is left elsewhere again once it is below this part of what it was told. */
const staleElsewhere = 0.75

/**
 * The least block a quota's process holds while the budget lasts, asked for or
 * not: one unit, or a ten-thousandth of the quota. What idle processes hold of
 * it is at most that much each, stranded at the window's end.
 */
export function quotaStandingBlock(capacity: number): number {
  return Math.max(1, Math.floor(capacity / 10_000))
}

/** Refresh periods of round trip a block may be sized for on top of the horizon. */
const maxRttPeriods = 8

/**
 * Seconds a client's block is sized for: the quota horizon (two refresh periods) and its
 * link's round trip, at most `maxRttPeriods` refresh periods of it (a client that answers its
 * pings late asks no more than that for it), never past the window's end.
 */
export function blockSec(
  leftMs: number,
  horizonMs: number,
  rttMs: number,
  refreshMs: number,
): number {
  const extraMs = Math.min(Math.max(0, rttMs), maxRttPeriods * refreshMs)
  return Math.min(leftMs, horizonMs + extraMs) / 1000
}

/**
 * What a process's first lease of a named quota is sized for, a second, while its demand is not
 * known (a gateway that just started declares its quotas and has asked nothing yet): its part
 * of the window's budget at an even pace, the budget over the window's length shared by the
 * `holders`. With a standing block alone, its next lease came with its next report, 100–250 ms
 * later, and it refused meanwhile what a central counter admits (about 130 checks of a hot
 * quota's start: docs/benchmarks.md). A long window's pace is below a standing block and
 * changes nothing (a daily 10,000 held by one paces 0.12 a second). One that asks nothing is cut back at
 * its next report, and acknowledges at once. A hot key's holders are seeded (hot-keys.ts).
 */
export function firstDemandPerSec(
  hotKey: boolean,
  capacity: number,
  window: { readonly startMs: number; readonly endMs: number },
  holders: number,
): number {
  const windowMs = window.endMs - window.startMs
  if (hotKey || !(windowMs > 0)) return 0
  return (capacity * 1000) / windowMs / Math.max(1, holders)
}

/**
 * Each client's block of `window` out of `left` (whole units), from `fromMs` on: three parts a
 * client, allocated by weighted max-min within priorities (see the round below). The round sizes
 * the blocks of the window in force; a named quota's next window's are sized the same way, ahead
 * of its start (ahead.ts), with all of its budget left.
 */
export function quotaBlocks(
  r: ResourceState,
  sharing: readonly Entry[],
  window: { readonly startMs: number; readonly endMs: number },
  left: number,
  fromMs: number,
  usedAsOfReports: boolean,
): Float64Array {
  const s = r.settings
  // To the window's end: a client spends its block until then, measured from its report
  // (lease-out.ts, `edge`); one that does not number its reports stops `graceMs` early.
  const leftMs = Math.max(0, window.endMs - fromMs)
  const horizonMs = quotaHorizonMs(s.refreshMs)
  const horizonSec = Math.min(leftMs, horizonMs) / 1000
  const standingBlock = horizonSec > 0 ? quotaStandingBlock(s.capacity) : 0
  // Three parts a client. What it asks until its next lease can come, or until the window's
  // end if sooner. Then (a band below, within its priority) what tops that up to a standing
  // block, so a process that has not asked yet (or not lately) admits its next request
  // without a round trip while the budget lasts. Then (a band below that) the rest of a
  // whole horizon's asking in a window's last moments: what a window's last second asks
  // comes by chance, past its estimate as often as below (with a block of the estimate alone,
  // quotas nobody came close to spending refused checks in the last 350 ms of each window:
  // docs/benchmarks.md, "A window's last moments"), and it comes only from what the others'
  // needs leave. Near
  // the budget's end what is left goes to those asking first: a standing block at an idle
  // process held the last unit of a key asked for elsewhere until the window's end (99 of
  // 100 admitted where a central counter admits 100).
  const clients: ClientDemand[] = []
  const firstPerSec = firstDemandPerSec(r.shape.hotKey, s.capacity, window, sharing.length)
  // A crowded keyed quota's hot key (shapes/default-holders.ts): a process the coordinator's own
  // part decides for gets no block (it asks the coordinator for every check), and that part
  // holds the rest of the key's budget, below every other band, as one central counter would.
  // Sized by its demand alone, its blocks of keys asked now and then ran dry between rounds
  // while most of the budget sat free or in standing blocks at the 30 processes it decides
  // for (30 gateways, a keyed quota: 93% of the central limiter).
  // The family's own resource, as the first holder of it here knows it (every holder's entry
  // of the family is of the same resource).
  const familyId = r.shape.hotKey ? r.settings.family?.familyId : undefined
  let crowded = false
  if (familyId !== undefined)
    for (const e of sharing) {
      const held = e.client.entries.get(familyId)
      if (held === undefined) continue
      crowded = held.resource.crowded
      break
    }
  for (const e of sharing) {
    // Its three bands asked for nothing: the grants are read three by three below.
    if (crowded && decidedCentrally(e, familyId!)) {
      for (const part of ['', '\0standing', '\0edge'])
        clients.push({
          id: `${e.client.key}${part}`,
          wants: 0,
          weight: e.weight,
          priority: 0,
          tenant: tenantOf(r, e),
        })
      continue
    }
    // A block lasts until the next lease can come: a report within a refresh period, and the
    // round trip of the client's link on top (a block of two periods ran dry for half of every
    // renewal at a 0.8 s round trip and 250 ms periods: ~40% admitted).
    // A process whose demand is not known yet, until it reports after its first lease (a
    // round another's report brings meanwhile would cut it to a standing block, below what it
    // spent), stands for its part of the budget at an even pace (firstDemandPerSec): in the
    // standing band, so it takes nothing from those asking.
    const guessed = !e.hasChecked && e.reportedMs <= (e.leases[0]?.sentMs ?? Infinity)
    const demand = e.history.estimate()
    const first = guessed ? firstPerSec : 0
    const blockOf = blockSec(leftMs, horizonMs, e.client.rttMs, s.refreshMs)
    // What it used is as of its last report, and a round comes up to a refresh period after it
    // (rounds keep their own schedule): what it spent since is asked too, so that the block left
    // as the lease comes still lasts until the next (at a round a period after the report,
    // blocks of a busy quota nobody came near ran dry 100-200 ms before the next lease:
    // docs/benchmarks.md). At most a period; none for a next window's block (ahead.ts).
    const sinceReportSec = usedAsOfReports
      ? Math.min(s.refreshMs, Math.max(0, fromMs - e.reportedMs)) / 1000
      : 0
    const asked = demand * (blockOf + sinceReportSec)
    const standing = Math.max(standingBlock, first * blockOf)
    // With what requests arriving at random may ask, past the block, until the next lease can
    // come (a refresh period and the link's round trip: arrival-noise.ts; of a demand measured,
    // not of a first lease's guess), in the lowest band with a window's last moments: it takes
    // only what the others' needs leave. A busy process's block of two periods covers one
    // period's chance already and gets nothing more (what a killed process strands stays
    // about one block: test/faults/quota.test.ts).
    const wholeSec = blockSec(Infinity, horizonMs, e.client.rttMs, s.refreshMs)
    const untilNext = demand * blockSec(Infinity, s.refreshMs, e.client.rttMs, s.refreshMs)
    const whole =
      Math.max(demand, first) * wholeSec +
      Math.max(0, untilNext + arrivalAllowance(untilNext) - demand * wholeSec)
    const tenant = tenantOf(r, e)
    // Four bands a priority: the coordinator's part's checks waiting now, then the three parts.
    const band = 4 * e.priority
    // The coordinator's own part, where the family is not crowded, is asked only what a process
    // could not decide (its part spent). Until it holds any of the key, those are requests
    // waiting for this lease (server/coordinator/central.ts waits for it), so what it asks
    // comes above every process's block, as a central counter admits them now: beside them,
    // the budget nobody held went to the processes whose checks had gone there (a customer's
    // 40 at once over 3 gateways: the part got 2 of the 10 free, and refused 8). Once it holds
    // some, it asks as any: above them for good, its demand took the processes' blocks, and
    // their checks went to it (remote asks 1,345 -> 6,357 in a run of the keyed quota over 3
    // gateways, admitting no more).
    const now = !crowded && e.client.clientId === centralClientId && !(e.newest > 0)
    clients.push(
      {
        id: e.client.key,
        wants: asked,
        weight: e.weight,
        priority: band + (now ? 3 : 2),
        tenant,
      },
      {
        id: `${e.client.key}\0standing`,
        wants: Math.max(0, standing - asked),
        weight: e.weight,
        priority: band + 1,
        tenant,
      },
      {
        id: `${e.client.key}\0edge`,
        wants:
          crowded && e.client.clientId === centralClientId
            ? left
            : Math.max(0, whole - Math.max(asked, standing)),
        weight: e.weight,
        priority: band,
        tenant,
      },
    )
  }
  const parts = allocate({
    capacity: wholeSlots(left),
    algorithm: 'fair-share',
    surplus: 'hold',
    tenants: s.tenants,
    clients,
  }).grants
  const grants = new Float64Array(sharing.length)
  for (let i = 0; i < sharing.length; i++)
    grants[i] = parts[3 * i]! + parts[3 * i + 1]! + parts[3 * i + 2]!
  return wholeUnits(grants)
}

/**
 * A quota (named, or a family's hot key of a keyed quota). Each client's
 * budget for the window is what it used (as it reported) plus a block: the
 * budget left (capacity less what everyone used, and less what silent
 * clients hold) shared by weighted max-min over the blocks asked for, a
 * block being what the client asks per second over the quota horizon (two
 * refresh periods: a steady client renews about once a period), never past
 * the window's end, and never below a standing block (quotaStandingBlock);
 * below those, while the budget lasts, what requests arriving at random may
 * ask until the next lease comes, past that (arrival-noise.ts).
 * Near the end of the budget blocks shrink to what is fair; a client that
 * asks for nothing is cut back to what it used and its standing block, and
 * the rest comes back. Decreases free budget only once acknowledged (a
 * client acknowledges only when what it used fits the new budget) or at the
 * window's end; a block sent is counted as used until then, whatever
 * becomes of its client.
 */
export const namedQuotaShape: Shape = Object.freeze<Shape>({
  name: 'quota',
  familyShare: false,
  hotKey: false,
  // Sized as the next window's first round would size them, every unit of it left.
  nextBlocks: (r, entries, next, left) => quotaBlocks(r, entries, next, left, next.startMs, false),
  round(pool, r, sharing, reserved, nowMs) {
    const s = r.settings
    const window = pool.windowOf(r, nowMs)!
    // A client whose newest lease is of a window before this one holds nothing of this one: it
    // hears of this one with a lease of 0 first, and what the round gives it comes from what is
    // free. Cut from its old lease instead (a decrease, sent at once), it spent that on top of
    // the blocks sent ahead, which hold all of this window's budget until acknowledged (1,002 of
    // 1,000: test/server/pool/past-window-renewal.test.ts). A block of this window sent ahead is
    // its lease first (ahead.ts).
    for (const e of sharing) {
      promoteDue(pool, e, nowMs)
      if (e.leasedBefore(window.index)) send(pool, e, 0, nowMs)
    }
    let usedAll = 0
    const used = sharing.map((e) => {
      const u = e.usedWindow === window.index ? e.used : 0
      usedAll += u
      return u
    })
    // A reset gives back what was used when it took effect (reset.ts).
    settleReset(r, window.index, nowMs)
    const left = Math.max(0, s.capacity + r.resetUnits(window.index) - reserved - usedAll)
    const blocks = quotaBlocks(r, sharing, window, left, nowMs, true)
    for (let i = 0; i < sharing.length; i++) {
      const e = sharing[i]!
      e.target = used[i]! + blocks[i]!
      // A key just gone hot: a holder that has not reported it since keeps the lease it was
      // seeded with until it does (what it spent of its default share is not known yet: cut to
      // a block, it would refuse what it may still spend), or for a refresh period (a holder
      // is asked to report at once, and one that spent some reports it every period; one
      // silent that long spent none). Longer, the seeds kept from a gateway that joins later
      // what it needs: its first checks of hot keys fell from 100% to 94% at two periods.
      if (e.reportedMs < e.seededMs && nowMs - e.seededMs < s.refreshMs)
        e.target = Math.max(e.target, e.newest)
    }
    settle(pool, r, sharing, nowMs)
    // A client whose newest lease is of no known window (a ledger restored it; one of an
    // earlier window was sent 0 above) hears of this one now, though its target is what it
    // holds, rather than sit refused until the next round. At most what it holds. (A keyed
    // quota's keys are told of a new window with their family's leases.)
    if (!r.shape.hotKey)
      for (const e of sharing)
        if (e.leaseWindow !== window.index && e.leases.length > 0)
          send(pool, e, Math.min(e.target, e.newest), nowMs)
    // A key's holder told some of it was left elsewhere (its refusals said to retry soon) hears
    // when none is left (they then say the window's end), and when a quarter of what it was
    // told has gone since (the cluster's remaining it shows callers: client/keyed/family.ts):
    // its lease again, with that said. At most log(quota)/log(4/3) + 1 times a window.
    if (r.shape.hotKey)
      for (const e of sharing) {
        if (e.sentElsewhere <= 0 || e.leases.length === 0) continue
        const now = elsewhere(r, e, window.index, nowMs)
        if (now === 0 || now < e.sentElsewhere * staleElsewhere) send(pool, e, e.newest, nowMs)
      }
  },
})
