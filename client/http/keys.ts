/**
 * The key of an IP address: an IPv4 address as it is (an IPv4-mapped IPv6
 * address as its IPv4), an IPv6 address as its prefix of `subnetBits` (a
 * /64 is one subscriber: keying by address would hand each user 2^64 keys).
 */
export function ipKey(ip: string, subnetBits: number | false): string {
  if (!ip.includes(':')) return ip
  const lower = ip.toLowerCase()
  if (lower.startsWith('::ffff:') && lower.includes('.')) return lower.slice(7)
  if (subnetBits === false || subnetBits >= 128) return lower
  const groups = ipv6Groups(lower)
  if (groups === undefined) return lower
  let out = ''
  for (let i = 0; i < 8; i++) {
    const keep = Math.max(0, Math.min(16, subnetBits - i * 16))
    const mask = keep === 0 ? 0 : (0xffff << (16 - keep)) & 0xffff
    out += (i === 0 ? '' : ':') + (groups[i]! & mask).toString(16)
  }
  return `${out}/${subnetBits}`
}

/** The eight 16-bit groups of an IPv6 address, or undefined when it is not one. */
function ipv6Groups(address: string): number[] | undefined {
  const zone = address.indexOf('%')
  let text = zone === -1 ? address : address.slice(0, zone)
  // A trailing dotted IPv4 part is two groups.
  const dotted = /(\d+)\.(\d+)\.(\d+)\.(\d+)$/.exec(text)
  if (dotted !== null) {
    const [a, b, c, d] = dotted.slice(1).map(Number) as [number, number, number, number]
    text = `${text.slice(0, dotted.index)}${((a << 8) | b).toString(16)}:${((c << 8) | d).toString(16)}`
  }
  const halves = text.split('::')
  if (halves.length > 2) return undefined
  const head = halves[0] === '' ? [] : halves[0]!.split(':')
  const tail = halves.length === 2 && halves[1] !== '' ? halves[1]!.split(':') : []
  const fill = 8 - head.length - tail.length
  if (halves.length === 1 ? fill !== 0 : fill < 1) return undefined
  const parts = [...head, ...Array<string>(halves.length === 2 ? fill : 0).fill('0'), ...tail]
  const groups = parts.map((p) => (/^[0-9a-f]{1,4}$/.test(p) ? parseInt(p, 16) : NaN))
  return groups.some(Number.isNaN) ? undefined : groups
}
