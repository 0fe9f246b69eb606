import { readFile } from 'node:fs/promises'
import { parse as parseYaml } from 'yaml'
import { SluiceError, describeIssues } from '../../shared/index.js'
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

/** Parses YAML or JSON text (YAML is a superset of JSON) and validates it. */
export function parseConfigText(text: string, source = 'config'): Config {
  let input: unknown
  try {
    input = parseYaml(text, { maxAliasCount: 100 })
  } catch (error) {
    throw new SluiceError(
      'SLUICE_ERR_CONFIG_INVALID',
      `${source}: not YAML or JSON: ${(error as Error).message}`,
    )
  }
  return parseConfig(input, source)
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
