/**
 * Quota windows: a fixed duration aligned to the epoch (`60s`, `1h`, `1d`:
 * windows start at multiples of it, in UTC), or a calendar unit (`day`,
 * `week` from Monday, `month`) in a time zone. Pure: the caller passes the
 * wall-clock time.
 */

import { parseDuration } from '../../shared/index.js'

/** A window as config states it, parsed. */
export type WindowSpec =
  | { readonly kind: 'fixed'; readonly ms: number }
  | {
      readonly kind: 'calendar'
      readonly unit: 'day' | 'week' | 'month'
      readonly timeZone: string
    }

/** One window: its number (strictly increasing with time), start and end, wall ms. */
export interface QuotaWindow {
  readonly index: number
  readonly startMs: number
  readonly endMs: number
}

/** Durations are read as everywhere else: `60s`, `1h`, `1d`, `'1 day'`. */
export { parseDuration }

/** Whether `timeZone` is one Intl knows. */
export function isTimeZone(timeZone: string): boolean {
  try {
    new Intl.DateTimeFormat('en-US', { timeZone })
    return true
  } catch {
    return false
  }
}

const formatters = new Map<string, Intl.DateTimeFormat>()

/** The local date and time of `wallMs` in `timeZone`. */
function localParts(
  wallMs: number,
  timeZone: string,
): { y: number; mo: number; d: number; h: number; mi: number; s: number } {
  let f = formatters.get(timeZone)
  if (f === undefined) {
    f = new Intl.DateTimeFormat('en-US', {
      timeZone,
      hourCycle: 'h23',
      year: 'numeric',
      month: 'numeric',
      day: 'numeric',
      hour: 'numeric',
      minute: 'numeric',
      second: 'numeric',
    })
    formatters.set(timeZone, f)
  }
  const p: Record<string, number> = {}
  for (const part of f.formatToParts(new Date(wallMs)))
    if (part.type !== 'literal') p[part.type] = Number(part.value)
  return { y: p.year!, mo: p.month!, d: p.day!, h: p.hour!, mi: p.minute!, s: p.second! }
}

/** The zone's offset from UTC at `wallMs`, ms (local − UTC). */
function offsetMs(wallMs: number, timeZone: string): number {
  const l = localParts(wallMs, timeZone)
  const asUtc = Date.UTC(l.y, l.mo - 1, l.d, l.h, l.mi, l.s)
  return asUtc - Math.floor(wallMs / 1000) * 1000
}

/** The wall ms at which the local date y-mo-d begins (midnight) in `timeZone`. */
function localMidnight(y: number, mo: number, d: number, timeZone: string): number {
  const guess = Date.UTC(y, mo - 1, d)
  // Two passes settle a midnight near a daylight-saving change.
  let t = guess - offsetMs(guess, timeZone)
  t = guess - offsetMs(t, timeZone)
  return t
}

/** The window of `spec` that holds `wallMs`. */
export function windowAt(spec: WindowSpec, wallMs: number): QuotaWindow {
  if (spec.kind === 'fixed') {
    const index = Math.floor(wallMs / spec.ms)
    return { index, startMs: index * spec.ms, endMs: (index + 1) * spec.ms }
  }
  const l = localParts(wallMs, spec.timeZone)
  // Days since the epoch of the local date: a number that grows by one each local day.
  const day = Math.round(Date.UTC(l.y, l.mo - 1, l.d) / 86_400_000)
  switch (spec.unit) {
    case 'day': {
      const next = new Date(Date.UTC(l.y, l.mo - 1, l.d + 1))
      return {
        index: day,
        startMs: localMidnight(l.y, l.mo, l.d, spec.timeZone),
        endMs: localMidnight(
          next.getUTCFullYear(),
          next.getUTCMonth() + 1,
          next.getUTCDate(),
          spec.timeZone,
        ),
      }
    }
    case 'week': {
      // ISO weeks: Monday first. 1970-01-01 was a Thursday (3 days after a Monday).
      const sinceMonday = (((day + 3) % 7) + 7) % 7
      const monday = new Date(Date.UTC(l.y, l.mo - 1, l.d - sinceMonday))
      const nextMonday = new Date(Date.UTC(l.y, l.mo - 1, l.d - sinceMonday + 7))
      return {
        index: Math.floor((day + 3) / 7),
        startMs: localMidnight(
          monday.getUTCFullYear(),
          monday.getUTCMonth() + 1,
          monday.getUTCDate(),
          spec.timeZone,
        ),
        endMs: localMidnight(
          nextMonday.getUTCFullYear(),
          nextMonday.getUTCMonth() + 1,
          nextMonday.getUTCDate(),
          spec.timeZone,
        ),
      }
    }
    case 'month': {
      const next = l.mo === 12 ? { y: l.y + 1, mo: 1 } : { y: l.y, mo: l.mo + 1 }
      return {
        index: l.y * 12 + (l.mo - 1),
        startMs: localMidnight(l.y, l.mo, 1, spec.timeZone),
        endMs: localMidnight(next.y, next.mo, 1, spec.timeZone),
      }
    }
  }
}

/** A key naming a window spec (two specs with the same key have the same windows). */
export function windowSpecKey(spec: WindowSpec): string {
  return spec.kind === 'fixed' ? `fixed:${spec.ms}` : `${spec.unit}:${spec.timeZone}`
}

/** The window of `spec` numbered `index` (what `windowAt` gives for any time inside it). */
export function windowOfIndex(spec: WindowSpec, index: number): QuotaWindow {
  if (spec.kind === 'fixed')
    return { index, startMs: index * spec.ms, endMs: (index + 1) * spec.ms }
  const dayMs = 86_400_000
  // A time inside the window, or near it; then a step or two to the window itself.
  const guess =
    spec.unit === 'day'
      ? index * dayMs + dayMs / 2
      : spec.unit === 'week'
        ? (index * 7 - 3) * dayMs + 3.5 * dayMs
        : Date.UTC(Math.floor(index / 12), ((index % 12) + 12) % 12, 15)
  let w = windowAt(spec, guess)
  for (let i = 0; i < 8 && w.index < index; i++) w = windowAt(spec, w.endMs)
  for (let i = 0; i < 8 && w.index > index; i++) w = windowAt(spec, w.startMs - 1)
  return w
}
