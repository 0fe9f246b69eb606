import { parseArgs } from 'node:util'
import { SluiceError } from '../../shared/index.js'

type Options = Record<string, { type: 'string' | 'boolean'; short?: string }>

/** Parses a subcommand's arguments; unknown options are a usage error naming them. */
export function parseCommandArgs<T extends Options>(
  command: string,
  args: readonly string[],
  options: T,
  positionals: { min: number; max: number },
): {
  values: { [K in keyof T]?: T[K]['type'] extends 'string' ? string : boolean }
  positionals: string[]
} {
  try {
    const parsed = parseArgs({ args: [...args], options, allowPositionals: true, strict: true })
    if (
      parsed.positionals.length < positionals.min ||
      parsed.positionals.length > positionals.max
    ) {
      throw new Error(
        `expects ${positionals.min === positionals.max ? positionals.min : `${positionals.min}–${positionals.max}`} argument(s), received ${parsed.positionals.length}`,
      )
    }
    return parsed
  } catch (error) {
    throw new SluiceError('SLUICE_ERR_CLI_USAGE', `${command}: ${(error as Error).message}`)
  }
}

/** A TCP port from an option value. */
export function portOption(value: string | undefined): number | undefined {
  if (value === undefined) return undefined
  const port = Number(value)
  if (!Number.isInteger(port) || port < 0 || port > 65_535) {
    throw new SluiceError(
      'SLUICE_ERR_CLI_USAGE',
      `--port must be an integer in [0, 65535], received ${JSON.stringify(value)}`,
    )
  }
  return port
}
