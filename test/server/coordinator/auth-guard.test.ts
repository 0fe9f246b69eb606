import { describe, expect, it } from 'vitest'
import { throttleKey } from '../../../server/coordinator/auth-guard.js'

describe('throttleKey', () => {
  it('keys IPv4 by the address, IPv6 by its /64, so rotating through a /64 buys nothing', () => {
    expect(throttleKey('203.0.113.7')).toBe('203.0.113.7')
    expect(throttleKey('::ffff:203.0.113.7')).toBe('203.0.113.7')
    const a = throttleKey('2001:db8:1:2:aaaa::1')
    expect(a).toBe('2001:db8:1:2::/64')
    expect(throttleKey('2001:0db8:0001:0002:ffff:ffff:ffff:ffff')).toBe(a)
    expect(throttleKey('2001:db8:1:3::1')).not.toBe(a)
    expect(throttleKey('2001:db8::1')).toBe('2001:db8:0:0::/64')
    expect(throttleKey('::1')).toBe('0:0:0:0::/64')
    expect(throttleKey('fe80::1%eth0')).toBe('fe80:0:0:0::/64')
    expect(throttleKey(undefined)).toBe('?')
  })
})
