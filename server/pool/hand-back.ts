import { domainLimits, keyLimits } from '../../shared/index.js'
import type { Entry, ResourceState } from './entry.js'

/**
 * What a rate family's falling shares held, handed to the rising ones. When a
 * process joins, the others' default shares fall; before, each key's bucket
 * at a faller kept what no longer fit its burst as an excess, spent there or
 * gone within a refill time, while the joiner's share rose empty and earned
 * (shared/limiters/bucket-parts.ts): a key that a central limiter held full
 * was refused at the joiner for a whole refill time ("100 per minute", burst
 * 100: a minute). Now a faller gives its excess up as it applies the fall
 * and says in its ack what it gave (`ack.held`: a level for every key it did
 * not name, less for those it names); the coordinator keeps it
 * (`HeldTokens`, per family) and hands it to the shares that rise, each in
 * proportion to its rise, in their leases (`handed`, repeated until
 * acknowledged, taken once per id). Tokens move, none are made: the faller
 * dropped them before it acknowledged, the riser gets them only after, at
 * most once, and never above its bucket's burst. What nobody rises to take
 * within `keptRefreshes` is dropped (the key's tokens are then fewer, never
 * more).
 *
 * A faller names at most maxSpentKeys keys; past that, nothing is handed.
 * Kept relative to the level (a key's tokens less the level's share of its
 * burst), parts of what several fallers gave add up key by key.
 */

/** Refresh periods what was given back waits for a share that rises. */
const keptRefreshes = 3

/** Tokens given back by shares of a family (`share` of it in all), or owed to a riser. */
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

  /** Moves `fraction` (0..1) of these into `to`. */
  give(fraction: number, to: HeldTokens): void {
    const f = Math.min(1, Math.max(0, fraction))
    if (!(f > 0)) return
    // A key named there and not here holds only the level here: its delta adds 0.
    to.share += this.share * f
    to.level += this.level * f
    for (const [key, delta] of this.deltas)
      to.deltas.set(key, (to.deltas.get(key) ?? 0) + delta * f)
    this.share -= this.share * f
    this.level -= this.level * f
    if (f >= 1) this.deltas.clear()
    else for (const [key, delta] of this.deltas) this.deltas.set(key, delta * (1 - f))
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

/** Whether `r` is a rate family's own resource (its shares may hand back what they held). */
export function handsBack(r: ResourceState): boolean {
  return (
    r.shape.familyShare &&
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
  const held = r.handBack !== undefined && fresh(r, nowMs) ? r.handBack : new HeldTokens(nowMs)
  const keys = said.keys.map(([key, tokens]): [string, number] => [
    key,
    Math.max(0, Math.min(tokens, beforeShare * burstOf(key))),
  ])
  if (held.add(fell, Math.min(said.level, fell), keys, burstOf)) r.handBack = held
}

/** Whether what `r`'s shares gave back may still be handed on. */
function fresh(r: ResourceState, nowMs: number): boolean {
  return nowMs - r.handBack!.sinceMs <= keptRefreshes * r.settings.refreshMs
}

/**
 * `entry`'s share rises by `rise` (a share of the family): it is owed that part of what the
 * falling shares gave back, in proportion (its lease carries it, `pendingHanded`).
 */
export function allot(entry: Entry, rise: number, nowMs: number): void {
  const r = entry.resource
  const held = r.handBack
  if (held === undefined || !(rise > 0)) return
  if (!fresh(r, nowMs) || held.empty || !(held.share > 0)) {
    r.handBack = undefined
    return
  }
  held.give(rise / held.share, (entry.owed ??= new HeldTokens(nowMs)))
  if (held.empty || !(held.share > 1e-12)) r.handBack = undefined
}
