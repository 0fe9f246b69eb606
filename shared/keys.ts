import { domainLimits } from './domain.js'

/**
 * The ids of a keyed family and of its keys, and the rule a key must meet:
 * one place, read by the client (where a caller's key enters), the HTTP edge
 * (which answers a bad key with 400) and the coordinator (which refuses a
 * report of a bad key's id, from whatever client it comes).
 *
 * A key is 1 to `maxKeyLength` printable characters (no C0 or C1 control
 * character, no DEL), and not `*` (`<prefix>/*` is the family's own id). A
 * key that breaks the rule is refused, not mapped: a mapping (a hash of a
 * long key, an escape of a control character) would make two spellings one
 * limit, or one caller's key another's, without the caller knowing. A
 * caller whose keys are longer hashes them first (docs/keys.md).
 */

/** Longest key of a keyed family, in UTF-16 code units (a plan's keys have the same bound). */
export const maxKeyLength = 256

/** The family's own resource id: `apikey/*` for the prefix `apikey`. */
export function familyIdOf(prefix: string): string {
  return `${prefix}/*`
}

/** The resource id of one key of a family: `apikey/k-1`. */
export function keyIdOf(prefix: string, key: string): string {
  return `${prefix}/${key}`
}

/** The key a key's resource id names, when it is one of `prefix`'s; undefined otherwise. */
export function keyOfId(prefix: string, id: string): string | undefined {
  return id.length > prefix.length + 1 &&
    id.charCodeAt(prefix.length) === 0x2f &&
    id.startsWith(prefix)
    ? id.slice(prefix.length + 1)
    : undefined
}

/**
 * Why `key` cannot be a key of the family `prefix`, or undefined when it
 * can. One pass over the characters, and none for a key too long: cheap
 * enough for every new key a process sees (a key already tracked is not
 * checked again).
 */
export function keyProblem(prefix: string, key: unknown): string | undefined {
  if (typeof key !== 'string') return `a key is a string; received ${typeof key}`
  const n = key.length
  if (n === 0) return 'a key is at least one character'
  if (n > maxKeyLength) return `a key is at most ${maxKeyLength} characters; this one has ${n}`
  if (prefix.length + 1 + n > domainLimits.maxIdLength)
    return `${prefix}/<key> is at most ${domainLimits.maxIdLength} characters; this one has ${prefix.length + 1 + n}`
  if (n === 1 && key === '*') return `the key * is the family's own id (${prefix}/*)`
  for (let i = 0; i < n; i++) {
    const c = key.charCodeAt(i)
    if (c < 0x20 || (c >= 0x7f && c <= 0x9f))
      return `a key holds printable characters only; character ${i} is U+${c.toString(16).padStart(4, '0').toUpperCase()}`
  }
  return undefined
}
