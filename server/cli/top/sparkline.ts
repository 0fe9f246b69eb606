const bars = '▁▂▃▄▅▆▇█'

/**
 * One character per value, scaled so `max` is a full block: 0 is a blank
 * (so "nothing" and "a little" differ), anything above 0 at least `▁`.
 * The newest `width` values, right-aligned; missing history is blank.
 */
export function sparkline(values: readonly number[], max: number, width: number): string {
  const shown = values.slice(Math.max(0, values.length - width))
  let out = ' '.repeat(width - shown.length)
  for (const v of shown) {
    if (!(v > 0) || !(max > 0)) {
      out += ' '
      continue
    }
    const i = Math.min(bars.length - 1, Math.max(0, Math.ceil((v / max) * bars.length) - 1))
    out += bars[i]
  }
  return out
}
