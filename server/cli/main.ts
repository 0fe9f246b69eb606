import { SluiceError, libraryVersion, suggestKey } from '../../shared/index.js'
import { allocateCommand } from './allocate.js'
import { flagHelp } from './flags.js'
import { keyCommand, keyFlags } from './key.js'
import { serveCommand, serveFlags } from './serve.js'
import { simulateCommand } from './simulate.js'
import { statusCommand, statusFlags } from './status.js'
import { topCommand, topFlags } from './top/index.js'
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
  key FAMILY KEY [--url U] [--reset]
                  One key of a keyed family: its limit, its window, which processes
                  may use how much of it, and what was used (GET /v1/key); --reset
                  gives a keyed quota's key its whole budget again (admin token).
  top [--url U]   A live view in the terminal: resources with sparklines, refreshed
                  every second; Enter shows a resource's clients.
  allocate        Read one JSON allocation scenario on stdin and print the grants:
                  {"capacity", "algorithm"?, "surplus"?, "tenants"?, "clients": [
                    {"id", "wants", "weight"?, "priority"?, "tenant"?}, ...]}
                  → {"grants": {"<id>": number, ...}}
  simulate FILE... [--out DIR]
                  Run scenarios (YAML) on a virtual clock: the real coordinator and
                  clients over a simulated network. Prints a summary; writes a CSV,
                  a JSON summary and an SVG chart per scenario to DIR (sim-results).
  help            Print this help.
  --version       Print the version.

Errors go to stderr with a SLUICE_ERR_* code; exit status 1 for bad input, 2 for bad usage.
`

/** Each command's own help: `sluice <command> --help`. */
export const commandUsage: Readonly<Record<string, string>> = Object.freeze({
  serve: `Usage: sluice serve --config FILE [options]

Runs a coordinator on one port (HTTP API, dashboard and the WebSocket clients connect to).
SIGHUP reloads the config (so do a change to the file and POST /v1/admin/reload);
SIGINT and SIGTERM stop it.

${flagHelp(serveFlags)}`,
  validate: `Usage: sluice validate FILE

Checks a config file: exit 0 with a summary, or 1 naming each bad field with the value
received, where it is in the file, and the key meant by a misspelled one.
`,
  status: `Usage: sluice status [--url URL] [--token TOKEN]

Prints a table of resources (configured ones too, before any client connects) from a
coordinator's HTTP API.

${flagHelp(statusFlags)}`,
  key: `Usage: sluice key FAMILY KEY [--url URL] [--token TOKEN] [--reset]

Prints one key of a keyed family (FAMILY is its prefix: apikey for apikey/*) from a
coordinator's HTTP API (GET /v1/key, the read or admin token): the key's limit (the plan's,
else the family's), a keyed quota's window, whether it is leased on its own, each process
that may use some of it and how much, and a quota key's use when it is leased on its own
(on default shares each process counts its own use and reports none).

With --reset (POST /v1/key/reset, the admin token), a keyed quota's key gets its whole
budget again for the rest of the window, as a central counter set back to 0 would: what
its processes reported spent is given back once each has said it (within a few refresh
periods), so from then on the key admits at most one budget more. Then the key is printed.

${flagHelp(keyFlags)}`,
  top: `Usage: sluice top [--url URL] [--token TOKEN] [--interval-ms MS] [--once]

A live view of a coordinator in the terminal, for a server without a browser: each resource
with how much of its limit is used, what is refused (and by how many clients), capacity,
leased, demand, and sparklines of use and refusals (one character per second). Reads the
same status API as the dashboard.

Keys: ↑/↓ (or k/j) select a resource · Enter (or →) shows its clients, who is refused and
since when · s changes the clients' order (refused, admitted, name, lease) · Esc (or ←)
goes back · q quits.

The KIND column says rate (tokens/s) or slots. CLIENTS written a!b: a of the b clients had
calls refused in the last seconds.

${flagHelp(topFlags)}`,
  allocate: `Usage: sluice allocate < problem.json

Reads one JSON allocation problem on stdin and prints the grants:
  {"capacity", "algorithm"?, "surplus"?, "tenants"?, "clients": [
    {"id", "wants", "weight"?, "priority"?, "tenant"?}, ...]}
  → {"grants": {"<id>": number, ...}}
`,
  simulate: `Usage: sluice simulate FILE... [--out DIR]

Runs scenarios (YAML) on a virtual clock: the real coordinator and clients over a simulated
network. Prints a summary; writes a CSV, a JSON summary and an SVG chart per scenario to
DIR (default sim-results). Exit 1 when a scenario's expectations fail.

${flagHelp(['out'])}`,
})

type Command = (args: readonly string[], io: CommandIo) => Promise<number>

const commands: Readonly<Record<string, Command>> = Object.freeze({
  allocate: allocateCommand,
  key: keyCommand,
  serve: serveCommand,
  simulate: simulateCommand,
  status: statusCommand,
  top: topCommand,
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
  if (name === '--version' || name === '-v' || name === 'version') {
    io.stdout.write(`sluice ${libraryVersion}\n`)
    return exitCodes.ok
  }
  const command = Object.hasOwn(commands, name) ? commands[name] : undefined
  if (command !== undefined && (args.includes('--help') || args.includes('-h'))) {
    io.stdout.write(commandUsage[name] ?? usage)
    return exitCodes.ok
  }
  try {
    if (command === undefined) {
      const meant = suggestKey(name.replace(/^-+/, ''), Object.keys(commands))
      throw new SluiceError(
        'SLUICE_ERR_CLI_USAGE',
        `unknown command ${JSON.stringify(name)}${meant === undefined ? '' : ` (did you mean ${meant}?)`}; try \`sluice help\``,
      )
    }
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
