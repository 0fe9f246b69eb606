import { spawn, type ChildProcess } from 'node:child_process'
import { mkdtemp, rm } from 'node:fs/promises'
import { createServer } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { waitFor } from './wait.js'

/** A free TCP port on 127.0.0.1 (closed again; a race with other processes is possible but rare). */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer()
    server.once('error', reject)
    server.listen(0, '127.0.0.1', () => {
      const address = server.address()
      const port = typeof address === 'object' && address !== null ? address.port : 0
      server.close(() => resolve(port))
    })
  })
}

function exited(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return Promise.resolve()
  return new Promise((resolve) => child.once('exit', () => resolve()))
}

/**
 * A real single-member etcd on loopback ports with a temporary data
 * directory (Debian's etcd-server; `.ci/system-deps`, the first step of `npm test`, installs it). `stop()` and
 * `start()` again keep the data and the ports, as a restarted member would.
 */
export class EtcdServer {
  readonly clientUrl: string
  readonly #peerUrl: string
  readonly #dir: string
  #child: ChildProcess | undefined
  #log = ''

  private constructor(dir: string, clientPort: number, peerPort: number) {
    this.#dir = dir
    this.clientUrl = `http://127.0.0.1:${clientPort}`
    this.#peerUrl = `http://127.0.0.1:${peerPort}`
  }

  static async create(): Promise<EtcdServer> {
    const dir = await mkdtemp(join(tmpdir(), 'sluice-etcd-'))
    const server = new EtcdServer(dir, await freePort(), await freePort())
    await server.start()
    return server
  }

  async start(): Promise<void> {
    const child = spawn(
      process.env.ETCD_BIN ?? 'etcd',
      [
        '--name=sluice-test',
        `--data-dir=${join(this.#dir, 'data')}`,
        `--listen-client-urls=${this.clientUrl}`,
        `--advertise-client-urls=${this.clientUrl}`,
        `--listen-peer-urls=${this.#peerUrl}`,
        `--initial-advertise-peer-urls=${this.#peerUrl}`,
        `--initial-cluster=sluice-test=${this.#peerUrl}`,
        '--log-level=error',
      ],
      { stdio: ['ignore', 'pipe', 'pipe'] },
    )
    this.#child = child
    const keep = (chunk: Buffer): void => {
      this.#log = (this.#log + chunk.toString()).slice(-4000)
    }
    child.stdout?.on('data', keep)
    child.stderr?.on('data', keep)
    const spawnError = new Promise<never>((_, reject) =>
      child.once('error', (error) =>
        reject(new Error(`cannot start etcd (apt-get install etcd-server): ${error.message}`)),
      ),
    )
    await Promise.race([
      spawnError,
      waitFor(`etcd at ${this.clientUrl} to be healthy`, async () => {
        if (child.exitCode !== null) throw new Error(`etcd exited: ${this.#log}`)
        const res = await fetch(`${this.clientUrl}/health`).catch(() => undefined)
        const body = res?.ok === true ? ((await res.json()) as { health?: string }) : undefined
        return body?.health === 'true' ? true : undefined
      }),
    ])
  }

  /** Stops etcd (SIGTERM) and waits for it to exit. */
  async stop(): Promise<void> {
    const child = this.#child
    this.#child = undefined
    if (child === undefined) return
    child.kill('SIGTERM')
    await exited(child)
  }

  async destroy(): Promise<void> {
    await this.stop()
    await rm(this.#dir, { recursive: true, force: true })
  }
}
