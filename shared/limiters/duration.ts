import { SluiceError } from '../errors.js'

/**
 * Durations as people write them: `60s`, `15m`, `1h`, `1d`, `500ms`, and the
 * spellings @fastify/rate-limit's `timeWindow` takes (`'1 minute'`,
 * `'10 seconds'`, `'2 hours'`, `'1 day'`, `'1 week'`). `m` is minutes.
 */
const unitMs: Readonly<Record<string, number>> = {
  ms: 1,
  msec: 1,
  msecs: 1,
  millisecond: 1,
  milliseconds: 1,
  s: 1000,
  sec: 1000,
  secs: 1000,
  second: 1000,
  seconds: 1000,
  m: 60_000,
  min: 60_000,
  mins: 60_000,
  minute: 60_000,
  minutes: 60_000,
  h: 3_600_000,
  hr: 3_600_000,
  hrs: 3_600_000,
  hour: 3_600_000,
  hours: 3_600_000,
  d: 86_400_000,
  day: 86_400_000,
  days: 86_400_000,
  w: 604_800_000,
  week: 604_800_000,
  weeks: 604_800_000,
}

/** A duration's text → ms (> 0, finite); undefined when it is not one. */
export function parseDuration(text: string): number | undefined {
  const m = /^(\d+(?:\.\d+)?)\s*([a-z]+)$/i.exec(text.trim())
  if (m === null) return undefined
  const unit = unitMs[m[2]!.toLowerCase()]
  if (unit === undefined) return undefined
  const ms = Number(m[1]) * unit
  return Number.isFinite(ms) && ms > 0 ? ms : undefined
}

/**
 * An option that is a duration: a number of ms (> 0, finite), or a text
 * `parseDuration` reads. Throws SLUICE_ERR_OPTION_INVALID naming the option.
 */
export function durationOption(owner: string, name: string, value: unknown): number {
  if (typeof value === 'number' && Number.isFinite(value) && value > 0) return value
  const ms = typeof value === 'string' ? parseDuration(value) : undefined
  if (ms !== undefined) return ms
  throw new SluiceError(
    'SLUICE_ERR_OPTION_INVALID',
    `${owner}: ${name} must be a duration: milliseconds (a number > 0) or a text such as '1 minute', '10s', '1h', '1 day'; received ${typeof value === 'string' ? JSON.stringify(value) : String(value)}`,
  )
}
