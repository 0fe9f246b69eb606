import { spawn, type ChildProcess } from 'node:child_process'
import { existsSync, readdirSync, statSync } from 'node:fs'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { waitFor } from './wait.js'

/** The repository root: the nearest folder up with a package.json (this file also runs from dist/). */
function findRoot(): string {
  let dir = dirname(fileURLToPath(import.meta.url))
  while (!existsSync(join(dir, 'package.json')) && dirname(dir) !== dir) dir = dirname(dir)
  return dir
}

const root = findRoot()
/** The built `sluice` command. */
export const cli = join(root, 'dist/server/cli/bin.js')

function newestSourceMs(dir: string): number {
  let newest = 0
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const path = join(dir, entry.name)
    if (entry.isDirectory()) newest = Math.max(newest, newestSourceMs(path))
    else if (entry.name.endsWith('.ts')) newest = Math.max(newest, statSync(path).mtimeMs)
  }
  return newest
}

/** Fails early, and clearly, when the compiled CLI is missing or older than the sources. */
export function assertBuilt(): void {
  let builtMs = 0
  try {
    builtMs = statSync(cli).mtimeMs
  } catch {
    throw new Error(`${cli} is missing: run npm run build (npm test does)`)
  }
  const sourceMs = Math.max(
    newestSourceMs(join(root, 'server')),
    newestSourceMs(join(root, 'shared')),
  )
  if (sourceMs > builtMs)
    throw new Error('dist/ is older than the sources: run npm run build (npm test does)')
}

export interface Readiness {
  ready: boolean
  role: 'leader' | 'follower'
  leader?: string | null
}

/** A coordinator as a real process (`sluice serve`), so a test can kill it. */
export class Replica {
  readonly child: ChildProcess
  url = ''
  wsUrl = ''
  output = ''

  private constructor(child: ChildProcess) {
    this.child = child
  }

  static async spawn(args: readonly string[]): Promise<Replica> {
    const child = spawn(process.execPath, [cli, 'serve', ...args], {
      stdio: ['ignore', 'pipe', 'pipe'],
      env: { ...process.env, SLUICE_LOG_LEVEL: 'warn' },
    })
    const replica = new Replica(child)
    const keep = (chunk: Buffer): void => {
      replica.output = (replica.output + chunk.toString()).slice(-20_000)
    }
    child.stdout?.on('data', keep)
    child.stderr?.on('data', keep)
    await waitFor('the replica to listen', () => {
      if (child.exitCode !== null) throw new Error(`replica exited: ${replica.output}`)
      const match = /listening on (http:\/\/\S+) \(clients connect to (ws:\/\/\S+)\)/.exec(
        replica.output,
      )
      if (match === null) return undefined
      replica.url = match[1]!
      replica.wsUrl = match[2]!
      return true
    })
    return replica
  }

  get alive(): boolean {
    return this.child.exitCode === null && this.child.signalCode === null
  }

  /** GET /readyz; undefined when the process does not answer. */
  async readiness(): Promise<Readiness | undefined> {
    if (!this.alive) return undefined
    const res = await fetch(`${this.url}/readyz`).catch(() => undefined)
    return res === undefined ? undefined : ((await res.json()) as Readiness)
  }

  /** Sends `signal` and waits for the exit. */
  async kill(signal: NodeJS.Signals = 'SIGKILL'): Promise<void> {
    if (!this.alive) return
    const exit = new Promise((resolve) => this.child.once('exit', resolve))
    this.child.kill(signal)
    await exit
  }
}
