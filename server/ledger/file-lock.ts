import { spawn, type ChildProcess } from 'node:child_process'
import { randomUUID } from 'node:crypto'
import { open, readFile, readlink, rm } from 'node:fs/promises'
import { hostname } from 'node:os'
import { SluiceError } from '../../shared/index.js'

/** What holds a data directory for this process, until `release`. */
export interface DirectoryLock {
  release(): Promise<void>
  /**
   * When the process that held the lock before had ended, in ms since the machine's boot
   * (`Clock.bootMs`), when its end is on record (`endedAtBootMs`); undefined when not known.
   */
  readonly predecessorEndedAtBootMs: number | undefined
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
 *
 * The holder's end is put on record (`<path>.ended`, `endedAtBootMs`) by the
 * child, after this process is gone and before the lock goes: so the next
 * holder knows how long ago its predecessor stopped deciding anything.
 */
export async function lockDirectory(path: string): Promise<DirectoryLock> {
  const token = randomUUID()
  const child = spawn(
    'flock',
    [
      '--nonblock',
      '--conflict-exit-code',
      String(conflictExit),
      path,
      'sh',
      '-c',
      endedScript,
      'sh',
      token,
      `${path}.ended`,
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
  // Read before this holder's line replaces the last one's.
  const before = (await handle.readFile('utf8').catch(() => '')).trim()
  const predecessorEndedAtBootMs = await endedAtBootMs(before, `${path}.ended`)
  await handle.truncate(0)
  await handle.write(`pid ${process.pid} on ${hostname()} token ${token}\n`, 0)
  await handle.close()
  return { release: () => releaseChild(child), predecessorEndedAtBootMs }
}

/**
 * The lock's child: says it holds the lock, waits for this process's end (its stdin closes,
 * however the process ends), then records it before the lock goes with it (so the next holder,
 * which reads it once it has the lock, finds it whole): the holder's token, the machine's boot
 * id, the time namespace, the seconds since boot (/proc/uptime: a clock no step of the wall
 * clock moves, nor libfaketime), and `end`, which a record cut short lacks. Builtins but for
 * `cat` and `readlink`: the lock is free again within a few milliseconds of the end.
 */
const endedScript =
  'echo locked; cat; read -r b < /proc/sys/kernel/random/boot_id; read -r u _ < /proc/uptime; ' +
  'printf "%s %s %s %s end\\n" "$1" "$b" "$(readlink /proc/self/ns/time 2>/dev/null)" "$u" > "$2"'

/**
 * When the lock's last holder ended, from its record (`endedScript`): ms since the machine's
 * boot (`Clock.bootMs` reads the same clock). Only a record of that holder (the token the lock
 * file names: a process that took the lock later and did not get to name itself never decided
 * anything) made on this machine since its boot, in this time namespace; undefined otherwise.
 */
async function endedAtBootMs(holderLine: string, endedPath: string): Promise<number | undefined> {
  const holder = /token (\S+)$/.exec(holderLine)?.[1]
  if (holder === undefined) return undefined
  const [record, bootId, timeNs] = await Promise.all([
    readFile(endedPath, 'utf8').catch(() => ''),
    readFile('/proc/sys/kernel/random/boot_id', 'utf8').catch(() => ''),
    readlink('/proc/self/ns/time').catch(() => ''),
  ])
  const [token, recordBootId, recordTimeNs, uptimeSec, end] = record.trim().split(' ')
  if (end !== 'end' || token !== holder) return undefined
  if (bootId.trim() === '' || recordBootId !== bootId.trim()) return undefined
  if ((recordTimeNs ?? '') !== timeNs) return undefined
  const atMs = Number(uptimeSec) * 1000
  return uptimeSec !== '' && Number.isFinite(atMs) ? atMs : undefined
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
      return { release: () => rm(path, { force: true }), predecessorEndedAtBootMs: undefined }
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
