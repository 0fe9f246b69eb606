import { describe, expect, it } from 'vitest'
import { CoordinatorMetrics } from '../../../server/observe/metrics.js'

const usage = (admitted: number, refused: number) => ({
  windowMs: 1000,
  admitted,
  refused,
  admittedCalls: admitted / 2,
  refusedCalls: refused / 2,
  waiting: 0,
})

const value = (
  text: string,
  name: string,
  resource: string,
  tenant: string,
): number | undefined => {
  const m = new RegExp(`^${name}\\{resource="${resource}",tenant="${tenant}"\\} (\\S+)$`, 'm').exec(
    text,
  )
  return m === null ? undefined : Number(m[1])
}

describe('usage counters', () => {
  it('sum every report into its series by the scrape, and keep counting across scrapes', async () => {
    const metrics = new CoordinatorMetrics(() => [])
    metrics.usageTotals.add('api', undefined, usage(10, 4))
    metrics.usageTotals.add('api', undefined, usage(6, 2))
    metrics.usageTotals.add('api', 'acme', usage(2, 0))
    let text = await metrics.registry.metrics()
    expect(value(text, 'sluice_admitted_total', 'api', '')).toBe(16)
    expect(value(text, 'sluice_refused_total', 'api', '')).toBe(6)
    expect(value(text, 'sluice_admitted_calls_total', 'api', '')).toBe(8)
    expect(value(text, 'sluice_refused_calls_total', 'api', '')).toBe(3)
    expect(value(text, 'sluice_admitted_total', 'api', 'acme')).toBe(2)
    // A scrape does not count twice; a counter only grows.
    text = await metrics.registry.metrics()
    expect(value(text, 'sluice_admitted_total', 'api', '')).toBe(16)
    metrics.usageTotals.add('api', undefined, usage(1, 1))
    text = await metrics.registry.metrics()
    expect(value(text, 'sluice_admitted_total', 'api', '')).toBe(17)
    expect(value(text, 'sluice_refused_total', 'api', '')).toBe(7)
  })

  it('count resources past the bound on series under _other, per tenant', async () => {
    const metrics = new CoordinatorMetrics(
      () => [],
      undefined,
      () => 2,
    )
    metrics.usageTotals.add('a', undefined, usage(1, 0))
    metrics.usageTotals.add('b', 't', usage(2, 0))
    metrics.usageTotals.add('c', undefined, usage(4, 0))
    metrics.usageTotals.add('d', undefined, usage(8, 0))
    metrics.usageTotals.add('e', 't', usage(16, 0))
    metrics.usageTotals.add('a', undefined, usage(32, 0))
    const text = await metrics.registry.metrics()
    expect(value(text, 'sluice_admitted_total', 'a', '')).toBe(33)
    expect(value(text, 'sluice_admitted_total', 'b', 't')).toBe(2)
    expect(value(text, 'sluice_admitted_total', 'c', '')).toBeUndefined()
    expect(value(text, 'sluice_admitted_total', '_other', '')).toBe(12)
    expect(value(text, 'sluice_admitted_total', '_other', 't')).toBe(16)
    expect(text.match(/^sluice_admitted_total\{/gm)).toHaveLength(4)
  })
})
