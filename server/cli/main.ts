import { SluiceError } from '../../shared/index.js'
import { allocateCommand } from './allocate.js'
import { serveCommand } from './serve.js'
import { simulateCommand } from './simulate.js'
import { statusCommand } from './status.js'
import { topCommand } from './top/index.js'
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

Errors go to stderr with a SLUICE_ERR_* code; exit status 1 for bad input, 2 for bad usage.
`

/** Each command's own help: `sluice <command> --help`. */
export const commandUsage: Readonly<Record<string, string>> = Object.freeze({
  serve: `Usage: sluice serve --config FILE [options]

Runs a coordinator on one port (HTTP API, dashboard and the WebSocket clients connect to).
SIGHUP reloads the config (so do a change to the file and POST /v1/admin/reload);
SIGINT and SIGTERM stop it.

Options:
  -c, --config FILE     YAML or JSON config (see examples/default.yaml)
  --host H              interface to listen on (default: server.host, 127.0.0.1)
  -p, --port P          port (default: server.port, 7070; 0 picks a free one)
  --data-dir DIR|none   the embedded ledger of commitments (default ./sluice-data; none: no ledger)
  --etcd URL,...        replicas: elect a leader through these etcd endpoints
  --advertise WS_URL    replicas: the URL followers redirect clients to
  --parent WS_URL,...   trees: lease capacity from this parent coordinator
  -h, --help            this help
`,
  validate: `Usage: sluice validate FILE

Checks a config file: exit 0 with a summary, or 1 naming each bad field with the value
received, where it is in the file, and the key meant by a misspelled one.
`,
  status: `Usage: sluice status [--url URL] [--token TOKEN]

Prints a table of resources (configured ones too, before any client connects) from a
coordinator's HTTP API.

Options:
  --url URL      the coordinator's HTTP URL (default http://127.0.0.1:7070)
  --token TOKEN  a read, admin or tenant token, when reads need one (or SLUICE_TOKEN)
  -h, --help     this help
`,
  top: `Usage: sluice top [--url URL] [--token TOKEN] [--interval-ms MS] [--once]

A live view of a coordinator in the terminal, for a server without a browser: each resource
with how much of its limit is used, what is refused (and by how many clients), capacity,
leased, demand, and sparklines of use and refusals (one character per second). Reads the
same status API as the dashboard.

Keys: ↑/↓ (or k/j) select a resource · Enter (or →) shows its clients, who is refused and
since when · s changes the clients' order (refused, admitted, name, lease) · Esc (or ←)
goes back · q quits.

Options:
  --url URL          the coordinator's HTTP URL (default http://127.0.0.1:7070)
  --token TOKEN      a read, admin or tenant token, when reads need one (or SLUICE_TOKEN)
  --interval-ms MS   how often to refresh (default 1000, at least 200)
  --once             print one plain frame and exit (also what it does without a terminal)
  -h, --help         this help
`,
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
`,
})

type Command = (args: readonly string[], io: CommandIo) => Promise<number>

const commands: Readonly<Record<string, Command>> = Object.freeze({
  allocate: allocateCommand,
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
  const command = Object.hasOwn(commands, name) ? commands[name] : undefined
  if (command !== undefined && (args.includes('--help') || args.includes('-h'))) {
    io.stdout.write(commandUsage[name] ?? usage)
    return exitCodes.ok
  }
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
