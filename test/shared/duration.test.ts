import { describe, expect, it } from 'vitest'
import { durationOption, parseDuration } from '../../shared/index.js'

describe('durations as text', () => {
  it.each([
    ['500ms', 500],
    ['10s', 10_000],
    ['10 seconds', 10_000],
    ['1 minute', 60_000],
    ['15m', 900_000],
    ['2 hours', 7_200_000],
    ['1h', 3_600_000],
    ['1 day', 86_400_000],
    ['1d', 86_400_000],
    ['1 week', 604_800_000],
    [' 1.5 Min ', 90_000],
  ])('reads %j as %d ms', (text, ms) => {
    expect(parseDuration(text)).toBe(ms)
  })

  it.each(['', 'minute', '1 fortnight', '0s', '-1s', '1e3ms', '1 month'])('refuses %j', (text) => {
    expect(parseDuration(text)).toBeUndefined()
  })

  it('takes ms as a number, and names the option it refuses', () => {
    expect(durationOption('X', 'window', 250)).toBe(250)
    expect(() => durationOption('X', 'window', 0)).toThrow(/X: window must be a duration/)
    expect(() => durationOption('X', 'window', '1 fortnight')).toThrow(/"1 fortnight"/)
  })
})
