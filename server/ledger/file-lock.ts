import { spawn, type ChildProcess } from 'node:child_process'
import { open, readFile, rm } from 'node:fs/promises'
import { hostname } from 'node:os'
import { SluiceError } from '../../shared/index.js'

/** What holds a data directory for this process, until `release`. */
export interface DirectoryLock {
  release(): Promise<void>
}

/** flock(1)'s exit code when another process holds the lock (`--conflict-exit-code`). */
const conflictExit = 75

/**
 * Takes `path` with a kernel lock (flock(2), through util-linux's flock(1)):
 * the lock belongs to an open file, not to a pid, so two processes started
 * at the same moment, or in different pid namespaces (containers sharing a
 * volume, both pid 1), cannot both hold it, and it is released when this
 * process dies, however it dies. A small `flock … cat` child holds it: its
 * stdin is a pipe from this process, so it exits (and the lock goes) when
 * this process exits or is killed. The file keeps who holds it, for the
 * error message of the next one that tries.
 *
 * Without flock(1) on the machine, a pid file is the fallback, which cannot
 * tell two processes of the same pid apart (see docs/operations.md).
 */
export async function lockDirectory(path: string): Promise<DirectoryLock> {
  const child = spawn(
    'flock',
    [
      '--nonblock',
      '--conflict-exit-code',
      String(conflictExit),
      path,
      'sh',
      '-c',
      'echo locked; exec cat',
    ],
    { stdio: ['pipe', 'pipe', 'ignore'] },
  )
  const outcome = await new Promise<'locked' | 'held' | 'missing'>((resolve, reject) => {
    child.once('error', (error: NodeJS.ErrnoException) =>
      error.code === 'ENOENT' ? resolve('missing') : reject(error),
    )
    child.once('exit', (code) =>
      code === conflictExit
        ? resolve('held')
        : reject(new Error(`flock exited with ${code ?? 'a signal'} before locking ${path}`)),
    )
    child.stdout.once('data', () => resolve('locked'))
  })
  if (outcome === 'missing') return pidFileLock(path)
  if (outcome === 'held') {
    const holder = (await readFile(path, 'utf8').catch(() => '')).trim()
    throw new SluiceError(
      'SLUICE_ERR_LEDGER_LOCKED',
      `${path} is held by another coordinator${holder === '' ? '' : ` (${holder})`}; give each coordinator its own data directory`,
    )
  }
  // Held for this process's life, without keeping its event loop alive.
  child.stdout.destroy()
  ;(child.stdin as unknown as { unref(): void }).unref()
  child.unref()
  const handle = await open(path, 'r+')
  await handle.truncate(0)
  await handle.write(`pid ${process.pid} on ${hostname()}\n`, 0)
  await handle.close()
  return { release: () => releaseChild(child) }
}

async function releaseChild(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return
  const exited = new Promise((resolve) => child.once('exit', resolve))
  // Held again while it ends, so the wait keeps this process alive.
  child.ref()
  ;(child.stdin as unknown as { ref(): void } | null)?.ref()
  child.stdin?.end()
  await exited
}

/** Whether a process with this pid is running (signal 0 tests without sending). */
function alive(pid: number): boolean {
  try {
    process.kill(pid, 0)
    return true
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === 'EPERM'
  }
}

/** The fallback: a pid file, taken over when its process is gone. */
async function pidFileLock(path: string): Promise<DirectoryLock> {
  for (let attempt = 0; attempt < 2; attempt++) {
    try {
      const handle = await open(path, 'wx')
      await handle.write(String(process.pid))
      await handle.close()
      return { release: () => rm(path, { force: true }) }
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error
      const pid = Number(await readFile(path, 'utf8').catch(() => ''))
      if (Number.isInteger(pid) && pid > 0 && pid !== process.pid && alive(pid))
        throw new SluiceError(
          'SLUICE_ERR_LEDGER_LOCKED',
          `${path} is in use by process ${pid}; give each coordinator its own data directory`,
        )
      await rm(path, { force: true })
    }
  }
  throw new SluiceError('SLUICE_ERR_LEDGER_LOCKED', `${path}: could not take the lock`)
}
