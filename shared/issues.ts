import type { z } from 'zod'
import { describeValue } from './errors.js'

/** What a caller knows that makes an issue clearer: the keys that exist, hints, where a path is. */
export interface IssueContext {
  /** Every key the schema knows, for "did you mean". */
  readonly knownKeys?: readonly string[] | undefined
  /** The schema itself: a misspelled key is matched against the keys of its own object. */
  readonly schema?: z.ZodType | undefined
  /** What users of other libraries write, and what they mean here (e.g. `max` → `policy.quota`). */
  readonly hints?: Readonly<Record<string, string>> | undefined
  /** Where a path is in the source (e.g. `line 4, column 7`), when known. */
  readonly locate?: ((path: readonly PropertyKey[]) => string | undefined) | undefined
}

/** Levenshtein distance, for suggestions (short strings only). */
function distance(a: string, b: string): number {
  const row = Array.from({ length: b.length + 1 }, (_, i) => i)
  for (let i = 1; i <= a.length; i++) {
    let prev = row[0]!
    row[0] = i
    for (let j = 1; j <= b.length; j++) {
      const next = row[j]!
      row[j] = Math.min(row[j]! + 1, row[j - 1]! + 1, prev + (a[i - 1] === b[j - 1] ? 0 : 1))
      prev = next
    }
  }
  return row[b.length]!
}

/** The known key closest to `key`, when it is close enough to be a slip. */
export function suggestKey(key: string, known: readonly string[]): string | undefined {
  let best: string | undefined
  let bestDistance = Infinity
  for (const k of known) {
    const d = distance(key.toLowerCase(), k.toLowerCase())
    if (d < bestDistance) {
      best = k
      bestDistance = d
    }
  }
  return bestDistance <= Math.min(3, Math.max(1, Math.ceil(key.length / 3))) ? best : undefined
}

function formatPath(path: readonly PropertyKey[]): string {
  let out = ''
  for (const key of path) {
    if (typeof key === 'number') out += `[${key}]`
    else out += out === '' ? String(key) : `.${String(key)}`
  }
  return out
}

/**
 * Formats a zod issue as `path.to[3].field: message`, the path naming the
 * field; with the value received, a "did you mean" for a misspelled key, and
 * where it is in the source when the context can tell.
 */
export function describeIssue(issue: z.core.$ZodIssue, context: IssueContext = {}): string {
  const path = formatPath(issue.path)
  let message = issue.message
  if (issue.code === 'unrecognized_keys') {
    const parts = issue.keys.map((key) => {
      const hint = context.hints?.[key]
      if (hint !== undefined) return `${key} (${hint})`
      const known =
        (context.schema === undefined ? undefined : keysAt(context.schema, issue.path)) ??
        context.knownKeys
      const near = known === undefined ? undefined : suggestKey(key, known)
      return near === undefined ? key : `${key} (did you mean ${near}?)`
    })
    message = `unknown ${issue.keys.length === 1 ? 'key' : 'keys'} ${parts.join(', ')}`
  } else if (
    'input' in issue &&
    issue.input !== undefined &&
    // An object's or a list's dump says nothing the path does not (and is cut short): the
    // value is named only when it is one.
    (typeof issue.input !== 'object' || issue.input === null) &&
    !/received/i.test(message)
  ) {
    message += `, received ${describeValue(issue.input)}`
  }
  const where = context.locate?.(issue.path)
  return `${where === undefined ? '' : `${where}: `}${path === '' ? '' : `${path}: `}${message}`
}

/** All issues of a zod error, one per `; `. */
export function describeIssues(error: z.ZodError, context: IssueContext = {}): string {
  return error.issues.map((issue) => describeIssue(issue, context)).join('; ')
}

type Def = Record<string, unknown> & { type?: string; shape?: Record<string, unknown> }

function defOf(node: unknown): Def | undefined {
  return (node as { _zod?: { def?: Def } } | undefined)?._zod?.def
}

/** The keys of the object a schema describes at `path`, through optionals, arrays and records. */
export function keysAt(schema: z.ZodType, path: readonly PropertyKey[]): string[] | undefined {
  let node: unknown = schema
  const unwrap = (): void => {
    for (let def = defOf(node); def !== undefined; def = defOf(node)) {
      const inner = def.innerType ?? def.in ?? (def.type === 'pipe' ? def.in : undefined)
      if (inner === undefined) return
      node = inner
    }
  }
  for (const key of path) {
    unwrap()
    const def = defOf(node)
    if (def === undefined) return undefined
    if (def.shape !== undefined && typeof key === 'string') node = def.shape[key]
    else if (def.element !== undefined) node = def.element
    else if (def.valueType !== undefined) node = def.valueType
    else return undefined
  }
  unwrap()
  const shape = defOf(node)?.shape
  return shape === undefined ? undefined : Object.keys(shape)
}

/** Every key of every object a zod schema describes (for suggestions). */
export function schemaKeys(schema: z.ZodType): string[] {
  const keys = new Set<string>()
  const seen = new Set<unknown>()
  const walk = (node: unknown): void => {
    if (node === null || typeof node !== 'object' || seen.has(node)) return
    seen.add(node)
    const def = (node as { _zod?: { def?: Record<string, unknown> } })._zod?.def
    if (def === undefined) return
    const shape = def.shape as Record<string, unknown> | undefined
    if (shape !== undefined)
      for (const [k, v] of Object.entries(shape)) {
        keys.add(k)
        walk(v)
      }
    for (const key of ['innerType', 'element', 'valueType', 'in', 'out', 'left', 'right', 'schema'])
      walk(def[key])
    for (const key of ['options', 'items'])
      if (Array.isArray(def[key])) for (const o of def[key] as unknown[]) walk(o)
  }
  walk(schema)
  return [...keys]
}
