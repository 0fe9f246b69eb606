import { readFile } from 'node:fs/promises'
import { LineCounter, parseDocument, type Document, parse as parseYaml } from 'yaml'
import {
  SluiceError,
  describeIssues,
  schemaKeys,
  type ErrorCode,
  type IssueContext,
} from '../../shared/index.js'
import { configSchema, type Config, type ConfigInput } from './schema.js'

const configKeys = schemaKeys(configSchema)

/** What people coming from other limiters write in a config, and what it is here. */
const configHints: Readonly<Record<string, string>> = {
  rate: 'a rate resource has kind: rate and a capacity in tokens/s',
  limit: 'capacity',
  max: 'capacity',
  ttl: 'leaseTtlMs',
  id: 'match',
  name: 'match',
}

/** Where each path of a YAML document starts, as `line L, column C` (keys for unknown keys). */
function locator(doc: Document, lines: LineCounter): IssueContext['locate'] {
  return (path) => {
    let node: unknown = doc.getIn(path as (string | number)[], true)
    if (node === undefined && path.length > 0) {
      // An unknown key's own path is its parent object: point at the parent.
      node = doc.getIn(path.slice(0, -1) as (string | number)[], true)
    }
    if (node === undefined && path.length === 0) node = doc.contents
    const range = (node as { range?: [number, number, number] } | undefined)?.range
    if (range === undefined) return undefined
    const { line, col } = lines.linePos(range[0])
    return `line ${line}, column ${col}`
  }
}

function deepFreeze<T>(value: T): T {
  if (typeof value === 'object' && value !== null && !Object.isFrozen(value)) {
    Object.freeze(value)
    for (const child of Object.values(value)) deepFreeze(child)
  }
  return value
}

/**
 * Validates a config object; throws SLUICE_ERR_CONFIG_INVALID naming every
 * bad field, the value received and, for a misspelled key, the one meant.
 * Result is frozen.
 */
export function parseConfig(
  input: unknown,
  source = 'config',
  locate?: IssueContext['locate'],
): Config {
  const result = configSchema.safeParse(input, { reportInput: true })
  if (!result.success)
    throw new SluiceError(
      'SLUICE_ERR_CONFIG_INVALID',
      `${source}: ${describeIssues(result.error, {
        schema: configSchema,
        knownKeys: configKeys,
        hints: configHints,
        locate,
      })}`,
    )
  return deepFreeze(result.data)
}

/** Parses YAML or JSON text (YAML is a superset of JSON) into plain data; errors carry `code`. */
export function parseYamlText(text: string, source: string, code: ErrorCode): unknown {
  try {
    return parseYaml(text, { maxAliasCount: 100 })
  } catch (error) {
    throw new SluiceError(code, `${source}: not YAML or JSON: ${(error as Error).message}`)
  }
}

/** Reads a YAML or JSON file into plain data: `readCode` if it cannot be read, `parseCode` if not YAML. */
export async function readYamlFile(
  path: string,
  readCode: ErrorCode,
  parseCode: ErrorCode,
): Promise<unknown> {
  let text: string
  try {
    text = await readFile(path, 'utf8')
  } catch (error) {
    throw new SluiceError(readCode, `${path}: ${(error as Error).message}`, { cause: error })
  }
  return parseYamlText(text, path, parseCode)
}

/** Parses YAML or JSON text and validates it; errors say where in the text each field is. */
export function parseConfigText(text: string, source = 'config'): Config {
  const lines = new LineCounter()
  const doc = parseDocument(text, { lineCounter: lines })
  if (doc.errors.length > 0)
    throw new SluiceError(
      'SLUICE_ERR_CONFIG_INVALID',
      `${source}: not YAML or JSON: ${doc.errors[0]!.message}`,
    )
  return parseConfig(doc.toJS({ maxAliasCount: 100 }), source, locator(doc, lines))
}

/** Reads and validates a config file. */
export async function loadConfigFile(path: string): Promise<Config> {
  let text: string
  try {
    text = await readFile(path, 'utf8')
  } catch (error) {
    throw new SluiceError('SLUICE_ERR_CONFIG_READ', `${path}: ${(error as Error).message}`, {
      cause: error,
    })
  }
  return parseConfigText(text, path)
}

/** A config given as an object (validated here) or as a file path. */
export async function resolveConfig(config: ConfigInput | Config | string): Promise<Config> {
  return typeof config === 'string' ? loadConfigFile(config) : parseConfig(config)
}
