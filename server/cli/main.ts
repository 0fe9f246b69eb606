import { SluiceError } from '../../shared/index.js'
import { allocateCommand } from './allocate.js'
import { serveCommand } from './serve.js'
import { simulateCommand } from './simulate.js'
import { statusCommand } from './status.js'
import { validateCommand } from './validate.js'
import { exitCodes, type CommandIo } from './io.js'

export const usage = `Usage: sluice <command> [options]

Commands:
  serve --config FILE [--host H] [--port P] [--etcd URL,...] [--advertise WS_URL] [--parent WS_URL]
        [--data-dir DIR|none]
                  Run a coordinator. SIGHUP reloads the config (so does a change to
                  the file, and POST /v1/admin/reload); SIGINT/SIGTERM stop it.
  validate FILE   Check a config file; exit 0, or 1 naming each bad field.
  status [--url U]
                  Print a table of resources from a coordinator's HTTP API
                  (default http://127.0.0.1:7070).
  allocate        Read one JSON allocation scenario on stdin and print the grants:
                  {"capacity", "algorithm"?, "surplus"?, "tenants"?, "clients": [
                    {"id", "wants", "weight"?, "priority"?, "tenant"?}, ...]}
                  → {"grants": {"<id>": number, ...}}
  simulate FILE... [--out DIR]
                  Run scenarios (YAML) on a virtual clock: the real coordinator and
                  clients over a simulated network. Prints a summary; writes a CSV,
                  a JSON summary and an SVG chart per scenario to DIR (sim-results).
  help            Print this help.

Errors go to stderr with a SLUICE_ERR_* code; exit status 1 for bad input, 2 for bad usage.
`

type Command = (args: readonly string[], io: CommandIo) => Promise<number>

const commands: Readonly<Record<string, Command>> = Object.freeze({
  allocate: allocateCommand,
  serve: serveCommand,
  simulate: simulateCommand,
  status: statusCommand,
  validate: validateCommand,
  help: (_args: readonly string[], io: CommandIo): Promise<number> => {
    io.stdout.write(usage)
    return Promise.resolve(exitCodes.ok)
  },
})

/** Runs the `sluice` command line; returns the exit status and never throws. */
export async function runCli(argv: readonly string[], io: CommandIo): Promise<number> {
  const [name, ...args] = argv
  if (name === undefined || name === '--help' || name === '-h') {
    io.stdout.write(usage)
    return name === undefined ? exitCodes.usage : exitCodes.ok
  }
  const command = Object.hasOwn(commands, name) ? commands[name] : undefined
  try {
    if (command === undefined)
      throw new SluiceError(
        'SLUICE_ERR_CLI_USAGE',
        `unknown command ${JSON.stringify(name)}; try \`sluice help\``,
      )
    return await command(args, io)
  } catch (error) {
    if (error instanceof SluiceError) {
      io.stderr.write(`sluice ${name}: ${error.code}: ${error.message}\n`)
      return error.code === 'SLUICE_ERR_CLI_USAGE' ? exitCodes.usage : exitCodes.failure
    }
    io.stderr.write(
      `sluice ${name}: unexpected error: ${(error as Error).stack ?? String(error)}\n`,
    )
    return exitCodes.failure
  }
}
