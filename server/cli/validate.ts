import { loadConfigFile } from '../config/index.js'
import { parseFlags } from './flags.js'
import { exitCodes, type CommandIo } from './io.js'

/** `sluice validate FILE`: exit 0 with a summary, or non-zero naming each bad field. */
export async function validateCommand(args: readonly string[], io: CommandIo): Promise<number> {
  const { positionals } = parseFlags('validate', args, [], { min: 1, max: 1 })
  const file = positionals[0]!
  const config = await loadConfigFile(file)
  io.stdout.write(
    `${file}: valid (${config.resources.length} resource template(s), ${Object.keys(config.tenants).length} tenant(s), listening on ${config.server.host}:${config.server.port})\n`,
  )
  return exitCodes.ok
}
