/**
 * Resource templates match ids by glob: `*` any run of characters (`/`
 * included: ids are flat names that may contain slashes), `?` any one
 * character, `[...]` a class (`[!...]` or `[^...]` negated, ranges allowed).
 * Everything else matches itself.
 */
export function isGlob(pattern: string): boolean {
  return /[*?[]/.test(pattern)
}

export function globToRegExp(pattern: string): RegExp {
  let source = ''
  for (let i = 0; i < pattern.length; i++) {
    const ch = pattern[i]!
    if (ch === '*') source += '[\\s\\S]*'
    else if (ch === '?') source += '[\\s\\S]'
    else if (ch === '[') {
      const close = pattern.indexOf(']', i + 2)
      if (close === -1) {
        source += '\\['
        continue
      }
      let body = pattern.slice(i + 1, close)
      let negate = false
      if (body.startsWith('!') || body.startsWith('^')) {
        negate = true
        body = body.slice(1)
      }
      source += `[${negate ? '^' : ''}${body.replace(/[\\\]^]/g, '\\$&')}]`
      i = close
    } else source += ch.replace(/[.*+?^${}()|[\]\\/]/g, '\\$&')
  }
  return new RegExp(`^${source}$`, 'u')
}

/** A compiled list of patterns: exact patterns first, then globs in their order. */
export class PatternList<T> {
  readonly #exact = new Map<string, T>()
  readonly #globs: Array<{ regexp: RegExp; value: T }> = []

  constructor(entries: Iterable<readonly [string, T]>) {
    for (const [pattern, value] of entries) {
      if (isGlob(pattern)) this.#globs.push({ regexp: globToRegExp(pattern), value })
      else if (!this.#exact.has(pattern)) this.#exact.set(pattern, value)
    }
  }

  /** The value of the first pattern matching `id` (exact first, then globs in order). */
  match(id: string): T | undefined {
    const exact = this.#exact.get(id)
    if (exact !== undefined) return exact
    for (const { regexp, value } of this.#globs) if (regexp.test(id)) return value
    return undefined
  }
}
