import { parseArgs } from 'node:util'
import { SluiceError, suggestKey } from '../../shared/index.js'

/** One command-line flag: how it is spelled, what value it takes, what it does. */
interface Flag {
  readonly type: 'string' | 'boolean'
  readonly short?: string
  /** The value's name in the help (`FILE`, `URL`); none for a boolean. */
  readonly value?: string
  readonly help: string
}

/** Every flag of the `sluice` command, spelled once: the parsers and the help text read this. */
export const flags = Object.freeze({
  config: {
    type: 'string',
    short: 'c',
    value: 'FILE',
    help: 'YAML or JSON config (see examples/default.yaml)',
  },
  host: {
    type: 'string',
    value: 'H',
    help: 'interface to listen on (default: server.host, 127.0.0.1)',
  },
  port: {
    type: 'string',
    short: 'p',
    value: 'P',
    help: 'port (default: server.port, 7070; 0 picks a free one)',
  },
  'data-dir': {
    type: 'string',
    value: 'DIR|none',
    help: 'the embedded ledger of commitments (default ./sluice-data; none: no ledger)',
  },
  etcd: {
    type: 'string',
    value: 'URL,...',
    help: 'replicas: elect a leader through these etcd endpoints',
  },
  advertise: {
    type: 'string',
    value: 'WS_URL',
    help: 'replicas: the URL followers redirect clients to',
  },
  parent: {
    type: 'string',
    value: 'WS_URL,...',
    help: 'trees: lease capacity from this parent coordinator',
  },
  url: {
    type: 'string',
    short: 'u',
    value: 'URL',
    help: 'the coordinator (default SLUICE_URL, else http://127.0.0.1:7070); ws:// URLs and host:port work too',
  },
  token: {
    type: 'string',
    value: 'TOKEN',
    help: 'a read, admin or tenant token, when reads need one (or SLUICE_TOKEN)',
  },
  'interval-ms': {
    type: 'string',
    value: 'MS',
    help: 'how often to refresh (default 1000, at least 200)',
  },
  once: {
    type: 'boolean',
    help: 'print one plain frame and exit (also what it does without a terminal)',
  },
  reset: {
    type: 'boolean',
    help: 'a keyed quota: give the key its whole budget again for the rest of the window (the admin token)',
  },
  out: {
    type: 'string',
    short: 'o',
    value: 'DIR',
    help: 'where to write the CSV, JSON and SVG of each scenario (default sim-results)',
  },
  help: { type: 'boolean', short: 'h', help: 'this help' },
} as const satisfies Record<string, Flag>)

export type FlagName = keyof typeof flags
type Values<N extends FlagName> = {
  [K in N]?: (typeof flags)[K]['type'] extends 'string' ? string : boolean
}

/** The options section of a command's help, from the flag table. */
export function flagHelp(names: readonly FlagName[]): string {
  const rows = [...names, 'help' as const].map((name) => {
    const f: Flag = flags[name]
    const spelled = `${'short' in f && f.short !== undefined ? `-${f.short}, ` : ''}--${name}${f.value === undefined ? '' : ` ${f.value}`}`
    return [spelled, f.help] as const
  })
  const width = Math.max(...rows.map(([s]) => s.length)) + 2
  return `Options:\n${rows.map(([s, h]) => `  ${s.padEnd(width)}${h}`).join('\n')}\n`
}

/**
 * Parses a command's arguments against the flags it takes. An unknown flag
 * is a usage error that names it and the flag meant, when one is close.
 */
export function parseFlags<N extends FlagName>(
  command: string,
  args: readonly string[],
  names: readonly N[],
  positionals: { min: number; max: number },
): { values: Values<N>; positionals: string[] } {
  const options: Record<string, { type: 'string' | 'boolean'; short?: string }> = {}
  for (const name of names) {
    const f: Flag = flags[name]
    options[name] = f.short === undefined ? { type: f.type } : { type: f.type, short: f.short }
  }
  for (const arg of args) {
    const m = /^--([^=]+)/.exec(arg)
    if (m === null || Object.hasOwn(options, m[1]!)) continue
    const meant = suggestKey(m[1]!, names)
    throw new SluiceError(
      'SLUICE_ERR_CLI_USAGE',
      `${command}: unknown option --${m[1]}${meant === undefined ? '' : ` (did you mean --${meant}?)`}; see \`sluice ${command} --help\``,
    )
  }
  try {
    const parsed = parseArgs({ args: [...args], options, allowPositionals: true, strict: true })
    const n = parsed.positionals.length
    if (n < positionals.min || n > positionals.max)
      throw new Error(
        `expects ${positionals.min === positionals.max ? positionals.min : `${positionals.min}–${positionals.max}`} argument(s), received ${n}`,
      )
    return { values: parsed.values as Values<N>, positionals: parsed.positionals }
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

/**
 * The coordinator's HTTP base URL from `--url`, else SLUICE_URL, else the
 * default. The URL `sluice serve` prints for clients (`ws://…/v1/connect`)
 * and a bare `host:port` both work: a status command means the same server.
 */
export function coordinatorUrl(value: string | undefined, env: NodeJS.ProcessEnv): string {
  const given = value ?? (env.SLUICE_URL === '' ? undefined : env.SLUICE_URL)
  if (given === undefined) return 'http://127.0.0.1:7070'
  let text = given.trim()
  if (!/^[a-z][a-z0-9+.-]*:\/\//i.test(text)) text = `http://${text}`
  let url: URL
  try {
    url = new URL(text)
  } catch {
    throw new SluiceError(
      'SLUICE_ERR_CLI_USAGE',
      `--url ${JSON.stringify(given)} is not a URL; try http://127.0.0.1:7070`,
    )
  }
  if (url.protocol === 'ws:') url.protocol = 'http:'
  else if (url.protocol === 'wss:') url.protocol = 'https:'
  else if (url.protocol !== 'http:' && url.protocol !== 'https:')
    throw new SluiceError(
      'SLUICE_ERR_CLI_USAGE',
      `--url ${JSON.stringify(given)}: use http://, https://, ws:// or wss://`,
    )
  // The WebSocket path names the same server: its HTTP API is beside it.
  const path = url.pathname.replace(/\/v1\/connect\/?$/, '').replace(/\/+$/, '')
  return `${url.protocol}//${url.host}${path}`
}

/**
 * Why a coordinator could not be read, with what to try: fetch's own
 * "fetch failed" hides the cause (ECONNREFUSED: nothing listens there).
 */
export function unreachable(base: string, error: unknown): SluiceError {
  const cause = (error as { cause?: { code?: string; message?: string } }).cause
  const code = cause?.code
  const hint =
    code === 'ECONNREFUSED'
      ? 'nothing listens there (ECONNREFUSED): is the coordinator running? start one with `npm start` or `sluice serve --config FILE`, or pass --url'
      : code === 'ENOTFOUND' || code === 'EAI_AGAIN'
        ? `the host is not known (${code}): check --url`
        : (error as Error).name === 'AbortError'
          ? 'no answer in time: is the address right, and is a firewall in the way?'
          : `${cause?.message ?? (error as Error).message}${code === undefined ? '' : ` (${code})`}`
  return new SluiceError('SLUICE_ERR_HTTP_UNREACHABLE', `${base}: ${hint}`, { cause: error })
}
