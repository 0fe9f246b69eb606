import { configWarnings, loadConfigFile } from '../config/index.js'
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
  // Valid, and said so; what it leaves open goes to stderr without failing (a kill switch is valid).
  for (const w of configWarnings(config)) {
    const where = 'match' in w.at ? `resource ${w.at.match}` : `tenant ${w.at.tenant}`
    io.stderr.write(`warning: ${where}: ${w.message}\n`)
  }
  return exitCodes.ok
}
