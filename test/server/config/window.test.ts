import { describe, expect, it } from 'vitest'
import { parseConfig, windowAt } from '../../../server/config/index.js'

describe('quota windows', () => {
  it('aligns fixed windows to the epoch', () => {
    const w = windowAt({ kind: 'fixed', ms: 3_600_000 }, Date.UTC(2026, 10, 25, 13, 20))
    expect(w.startMs).toBe(Date.UTC(2026, 10, 25, 13))
    expect(w.endMs).toBe(Date.UTC(2026, 10, 25, 14))
    expect(windowAt({ kind: 'fixed', ms: 3_600_000 }, w.endMs).index).toBe(w.index + 1)
  })

  it('keeps calendar days, weeks and months in a time zone, across a daylight-saving change', () => {
    const paris = (unit: 'day' | 'week' | 'month', ms: number) =>
      windowAt({ kind: 'calendar', unit, timeZone: 'Europe/Paris' }, ms)
    // 25 Nov 2026, 00:30 in Paris is 24 Nov 23:30 UTC: already the 25th there.
    const day = paris('day', Date.UTC(2026, 10, 24, 23, 30))
    expect(day.startMs).toBe(Date.UTC(2026, 10, 24, 23))
    expect(day.endMs).toBe(Date.UTC(2026, 10, 25, 23))
    // The day clocks go back (25 Oct 2026): 25 hours long.
    const long = paris('day', Date.UTC(2026, 9, 25, 12))
    expect(long.endMs - long.startMs).toBe(25 * 3_600_000)
    expect(paris('day', long.endMs).index).toBe(long.index + 1)
    // Weeks start on Monday: Wed 25 Nov 2026 → Mon 23 Nov.
    const week = paris('week', Date.UTC(2026, 10, 25, 12))
    expect(week.startMs).toBe(Date.UTC(2026, 10, 22, 23))
    expect(week.endMs - week.startMs).toBe(7 * 86_400_000)
    const month = paris('month', Date.UTC(2026, 10, 25, 12))
    expect(month.startMs).toBe(Date.UTC(2026, 9, 31, 23))
    expect(month.endMs).toBe(Date.UTC(2026, 10, 30, 23))
    expect(paris('month', month.endMs).index).toBe(month.index + 1)
  })

  it('refuses a quota config naming the field: no window, one that drifts, an unknown zone', () => {
    const quota = (extra: Record<string, unknown>) => () =>
      parseConfig({ resources: [{ match: 'emails', kind: 'quota', capacity: 500, ...extra }] })
    expect(quota({})).toThrow(/resources\[0\]\.window: a quota needs its window/)
    expect(quota({ window: '7m' })).toThrow(/window: 7m does not divide a day/)
    expect(quota({ window: 'soon' })).toThrow(/window: a duration such as/)
    expect(quota({ window: { unit: 'day', timeZone: 'Mars/Olympus' } })).toThrow(
      /window\.timeZone: "Mars\/Olympus" is not a time zone/,
    )
    expect(quota({ window: '1h' })).not.toThrow()
    expect(quota({ window: { unit: 'month', timeZone: 'America/New_York' } })).not.toThrow()
    expect(() =>
      parseConfig({ resources: [{ match: 'api', kind: 'rate', capacity: 5, window: '1h' }] }),
    ).toThrow(/window: a window is for kind: quota/)
  })

  it('takes a keyed quota (keyed: true, kind: quota), and defaultShare only on one', () => {
    const family = (extra: Record<string, unknown>) => () =>
      parseConfig({
        resources: [{ match: 'customer/*', keyed: true, capacity: 10_000, ...extra }],
      })
    expect(family({ kind: 'quota', window: '1d' })).not.toThrow()
    expect(family({ kind: 'quota', window: '1d', defaultShare: 0.5 })).not.toThrow()
    expect(family({ kind: 'quota', window: '1d', defaultShare: 0 })).toThrow(/defaultShare/)
    expect(family({ kind: 'quota', window: '1d', defaultShare: 1.5 })).toThrow(/defaultShare/)
    expect(family({ kind: 'rate', defaultShare: 0.5 })).toThrow(
      /defaultShare: defaultShare is for a keyed quota/,
    )
  })
})
