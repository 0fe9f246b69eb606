import { domainLimits, keyLimits } from '../../shared/index.js'
import type { Entry, ResourceState } from './entry.js'

/**
 * What a rate family's falling shares held, handed to the share that rises.
 * When a process joins, the others' default shares fall; before, each key's
 * bucket at a faller kept what no longer fit its burst as an excess, spent
 * there or gone within a refill time, while the joiner's share rose empty
 * and earned (shared/limiters/bucket-parts.ts): a key that a central limiter
 * held full was refused at the joiner for a whole refill time ("100 per
 * minute", burst 100: a minute). The same when a key leased on its own
 * moves between processes.
 *
 * Now a faller gives its excess up as it applies the fall and says in its
 * ack what it gave (`ack.held`: a level for every key it did not name, less
 * for those it names; for a key's own lease, a share of its burst); the
 * coordinator keeps it (`HeldTokens`, per resource) and hands it whole to
 * the next share that rises by at least the share it came from, in that
 * rise's lease (`handed`, repeated until acknowledged, taken once per id,
 * never with a lease of less). Tokens move with their slice, none are made:
 * the faller dropped them before it acknowledged; the riser gets them after,
 * once, into the fresh part its rise makes, at the rise (so that part holds
 * no more than the slice would have, had it stayed), never above its burst.
 * A rise that takes less than every slice given (two risers), a riser with a
 * handover not yet acknowledged, or nobody within `keptRefreshes`: what was
 * given is dropped (the key's tokens are then fewer, never more).
 *
 * A faller names at most maxSpentKeys keys; past that, nothing is handed.
 * Kept relative to the level (a key's tokens less the level's share of its
 * burst), what several fallers gave adds up key by key.
 */

/** Refresh periods what was given back waits for a share that rises. */
const keptRefreshes = 3

/** Tokens given back by falling shares of a resource (`share` of it in all). */
export class HeldTokens {
  /** The share of the family these came with. */
  share = 0
  /** Of every key not in `deltas`: this share of its burst. */
  level = 0
  /** A key's tokens less `level` × its burst. */
  readonly deltas = new Map<string, number>()
  /** When the first of them came (what waits too long is dropped). */
  sinceMs: number

  constructor(nowMs: number) {
    this.sinceMs = nowMs
  }

  /**
   * Adds what a share gave: `level` of every key's burst, `keys` named with their tokens.
   * False (nothing added) when that would name more than maxSpentKeys keys.
   */
  add(
    share: number,
    level: number,
    keys: readonly (readonly [string, number])[],
    burstOf: (key: string) => number,
  ): boolean {
    let fresh = 0
    for (const [key] of keys) if (!this.deltas.has(key)) fresh++
    if (this.deltas.size + fresh > domainLimits.maxSpentKeys) return false
    this.share += share
    this.level += level
    for (const [key, tokens] of keys)
      this.deltas.set(key, (this.deltas.get(key) ?? 0) + tokens - level * burstOf(key))
    return true
  }

  /** What a lease carries of these (`handed`, less its id): a key's tokens, never below 0. */
  wire(burstOf: (key: string) => number): { level: number; keys: [string, number][] } {
    const keys: [string, number][] = []
    for (const [key, delta] of this.deltas)
      keys.push([key, Math.max(0, this.level * burstOf(key) + delta)])
    return { level: Math.min(1, Math.max(0, this.level)), keys }
  }

  get empty(): boolean {
    return !(this.level > 1e-12) && this.deltas.size === 0
  }
}

/** A key's burst in a family's settings (the plan's, else the family's). */
export function burstOfKey(r: ResourceState): (key: string) => number {
  const family = r.settings.family!
  const defaults = { capacity: family.keyCapacity, burst: family.keyBurst }
  return (key) => keyLimits(family.plan, key, defaults).burst
}

/**
 * Whether `r` is a rate family's own resource or one of its keys leased on its own: a share
 * of it that falls may hand back what it held (a key's lease, as a share of its burst).
 */
export function handsBack(r: ResourceState): boolean {
  return (
    (r.shape.familyShare || r.shape.hotKey) &&
    r.settings.quotaWindow === undefined &&
    r.settings.family?.keyKind === 'rate'
  )
}

/**
 * A share of `entry` fell from `beforeShare` and its client gave up what it held beyond the
 * new share (its ack's `held`): kept for the shares that rise, capped at what the share that
 * fell could have held (a level at most the fall, a key at most the share before).
 */
export function takeBack(
  entry: Entry,
  beforeShare: number,
  said: { readonly level: number; readonly keys: readonly (readonly [string, number])[] },
  nowMs: number,
): void {
  const r = entry.resource
  if (!handsBack(r) || !(r.settings.capacity > 0)) return
  const fell = beforeShare - entry.committed / r.settings.capacity
  if (!(fell > 0)) return
  const burstOf = burstOfKey(r)
  const held =
    r.handBack !== undefined && fresh(r.handBack, r, nowMs) ? r.handBack : new HeldTokens(nowMs)
  // A key leased on its own says a share of its own burst, and names no key.
  const keys = r.shape.familyShare
    ? said.keys.map(([key, tokens]): [string, number] => [
        key,
        Math.max(0, Math.min(tokens, beforeShare * burstOf(key))),
      ])
    : []
  if (held.add(fell, Math.min(said.level, fell), keys, burstOf)) r.handBack = held
}

/** Whether what `r`'s shares gave back may still be handed on. */
function fresh(held: HeldTokens, r: ResourceState, nowMs: number): boolean {
  return nowMs - held.sinceMs <= keptRefreshes * r.settings.refreshMs
}

/**
 * A share of `r` rises by `rise` (a share of it): it takes what falling shares gave back if
 * it takes every slice they gave (`rise` at least their share), else nobody ever does. Tokens
 * go with the slice they were held in, into the fresh part its rise makes, at the rise: put
 * in a share that took another slice, or later (its fresh part earning meanwhile, to its
 * burst), they would be held twice (found by the family model: 12.8 of a burst of 12).
 */
export function takeHandBack(
  r: ResourceState,
  rise: number,
  nowMs: number,
): HeldTokens | undefined {
  const held = r.handBack
  if (held === undefined) return undefined
  r.handBack = undefined
  if (!fresh(held, r, nowMs) || held.empty || rise < held.share - 1e-9) return undefined
  return held
}
