import { spawn, type ChildProcess } from 'node:child_process'
import { existsSync } from 'node:fs'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'

/** The checkout's root: the nearest folder up from here with a package.json. */
export function findRoot(): string {
  let dir = dirname(fileURLToPath(import.meta.url))
  while (!existsSync(join(dir, 'package.json')) && dirname(dir) !== dir) dir = dirname(dir)
  return dir
}

/** A client process of a fault scenario, and what it wrote on stdout. */
export interface WorkerProcess {
  readonly child: ChildProcess
  output: string
  readonly exited: Promise<void>
}

/** Starts `dist/bench/faults/<script>.js` with its spec as its one argument; collects stdout. */
export function startWorker(script: string, spec: unknown): WorkerProcess {
  const child = spawn(
    process.execPath,
    [join(findRoot(), `dist/bench/faults/${script}.js`), JSON.stringify(spec)],
    { stdio: ['ignore', 'pipe', 'inherit'] },
  )
  const worker: WorkerProcess = {
    child,
    output: '',
    exited: new Promise<void>((resolve) => child.once('exit', () => resolve())),
  }
  child.stdout.on('data', (d: Buffer) => (worker.output += d.toString()))
  return worker
}
