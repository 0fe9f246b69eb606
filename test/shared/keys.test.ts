import fc from 'fast-check'
import { describe, expect, it } from 'vitest'
import { keyIdOf, keyOfId, keyProblem, maxKeyLength, resourceId } from '../../shared/index.js'

describe('the key rule of a keyed family', () => {
  it('takes what a caller sends in a header or an IP, and refuses what the protocol cannot carry', () => {
    for (const key of ['customer-42', '203.0.113.7', '2001:db8::/64', 'a/b', 'é', 'x'.repeat(256)])
      expect(keyProblem('apikey', key), key).toBeUndefined()
    expect(keyProblem('apikey', '')).toMatch(/at least one/)
    expect(keyProblem('apikey', '*')).toMatch(/family's own id/)
    expect(keyProblem('apikey', 'bad\u0085key')).toMatch(/U\+0085/)
    expect(keyProblem('apikey', 'tab\tkey')).toMatch(/U\+0009/)
    expect(keyProblem('apikey', 'x'.repeat(1100))).toMatch(/at most 256/)
    expect(keyProblem('apikey', 42)).toMatch(/a string/)
    expect(keyProblem('p'.repeat(900), 'x'.repeat(200))).toMatch(/at most 1024/)
  })

  it('accepts a key exactly when its id is a resource id the protocol carries (and not the family’s own)', () => {
    fc.assert(
      fc.property(fc.string({ maxLength: 300, unit: 'binary' }), (key) => {
        const ok = keyProblem('apikey', key) === undefined
        const carried = resourceId.safeParse(keyIdOf('apikey', key)).success
        if (ok) expect(carried).toBe(true)
        if (carried && key !== '' && key !== '*' && key.length <= maxKeyLength)
          expect(ok).toBe(true)
      }),
    )
  })

  it('reads a key back from its id, and nothing from another family’s', () => {
    expect(keyOfId('apikey', 'apikey/k-1')).toBe('k-1')
    expect(keyOfId('apikey', 'apikey2/k-1')).toBeUndefined()
    expect(keyOfId('apikey', 'apikey/')).toBeUndefined()
  })
})
