import { readFile } from 'node:fs/promises'
import { parse as parseYaml } from 'yaml'
import { SluiceError, describeIssues, type ErrorCode } from '../../shared/index.js'
import { configSchema, type Config, type ConfigInput } from './schema.js'

function deepFreeze<T>(value: T): T {
  if (typeof value === 'object' && value !== null && !Object.isFrozen(value)) {
    Object.freeze(value)
    for (const child of Object.values(value)) deepFreeze(child)
  }
  return value
}

/** Validates a config object; throws SLUICE_ERR_CONFIG_INVALID naming every bad field. Result is frozen. */
export function parseConfig(input: unknown, source = 'config'): Config {
  const result = configSchema.safeParse(input)
  if (!result.success)
    throw new SluiceError('SLUICE_ERR_CONFIG_INVALID', `${source}: ${describeIssues(result.error)}`)
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

/** Parses YAML or JSON text and validates it. */
export function parseConfigText(text: string, source = 'config'): Config {
  return parseConfig(parseYamlText(text, source, 'SLUICE_ERR_CONFIG_INVALID'), source)
}

/** Reads and validates a config file. */
export async function loadConfigFile(path: string): Promise<Config> {
  const input = await readYamlFile(path, 'SLUICE_ERR_CONFIG_READ', 'SLUICE_ERR_CONFIG_INVALID')
  return parseConfig(input, path)
}

/** A config given as an object (validated here) or as a file path. */
export async function resolveConfig(config: ConfigInput | Config | string): Promise<Config> {
  return typeof config === 'string' ? loadConfigFile(config) : parseConfig(config)
}
