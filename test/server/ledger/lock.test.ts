import { spawn, spawnSync } from 'node:child_process'
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { dirname, join } from 'node:path'
import { pathToFileURL } from 'node:url'
import { afterEach, beforeAll, describe, expect, it } from 'vitest'
import { lockDirectory } from '../../../server/ledger/file-lock.js'
import { systemClock } from '../../../shared/index.js'
import { assertBuilt, cli } from '../../helpers/replica.js'

// Two coordinators started at the same moment on one data directory (after a crash left its
// lock file behind): exactly one may hold it.
// Real processes; with `unshare --pid --fork` each runs as pid 1 of a pid namespace of its own,
// as in two containers sharing a volume.

beforeAll(() => assertBuilt())
const dirs: string[] = []
afterEach(() => {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true })
})

/** Starts `sluice serve` (maybe as pid 1 of a new pid namespace); resolves how it ended up. */
function serve(
  configPath: string,
  dataDir: string,
  namespaced: boolean,
): Promise<{ outcome: 'listening' | 'locked' | 'other'; stop: () => void; output: string }> {
  const argv = [cli, 'serve', '--config', configPath, '--port', '0', '--data-dir', dataDir]
  const child = namespaced
    ? spawn('unshare', ['--pid', '--fork', '--kill-child', process.execPath, ...argv], {
        stdio: ['ignore', 'pipe', 'pipe'],
      })
    : spawn(process.execPath, argv, { stdio: ['ignore', 'pipe', 'pipe'] })
  let output = ''
  return new Promise((resolve) => {
    const stop = (): void => void child.kill('SIGKILL')
    const seen = (d: Buffer): void => {
      output += d.toString()
      if (output.includes('listening on')) resolve({ outcome: 'listening', stop, output })
    }
    child.stdout.on('data', seen)
    child.stderr.on('data', seen)
    child.once('exit', () =>
      resolve({
        outcome: output.includes('SLUICE_ERR_LEDGER_LOCKED') ? 'locked' : 'other',
        stop,
        output,
      }),
    )
  })
}

const namespaces = spawnSync('unshare', ['--pid', '--fork', 'true']).status === 0

describe('the data directory lock', () => {
  for (const namespaced of [false, true])
    it(`lets exactly one of two coordinators started together hold it${namespaced ? ', each pid 1 of its own pid namespace' : ''}`, async () => {
      expect(namespaced && !namespaces, 'unshare --pid --fork works here (root)').toBe(false)
      const dir = mkdtempSync(join(tmpdir(), 'sluice-lock-'))
      dirs.push(dir)
      const configPath = join(dir, 'sluice.json')
      writeFileSync(
        configPath,
        JSON.stringify({
          server: { host: '127.0.0.1' },
          resources: [{ match: 'api', kind: 'rate', capacity: 10 }],
        }),
      )
      for (let trial = 0; trial < 5; trial++) {
        const dataDir = join(dir, `data-${trial}`)
        // After a crash: the lock file of a process that is gone.
        mkdirSync(dataDir)
        writeFileSync(join(dataDir, 'ledger.lock'), '2147483646')
        const both = await Promise.all([
          serve(configPath, dataDir, namespaced),
          serve(configPath, dataDir, namespaced),
        ])
        for (const b of both) b.stop()
        const outcomes = both.map((b) => b.outcome).sort()
        expect(outcomes, both.map((b) => b.output.slice(-300)).join('\n')).toEqual([
          'listening',
          'locked',
        ])
      }
    }, 60_000)
})

/** A real process that takes the lock (the built file-lock.ts) and holds it until killed. */
async function holder(path: string): Promise<() => Promise<void>> {
  const lockModule = pathToFileURL(join(dirname(cli), '..', 'ledger', 'file-lock.js')).href
  const child = spawn(
    process.execPath,
    [
      '--input-type=module',
      '-e',
      `import { lockDirectory } from ${JSON.stringify(lockModule)}
       await lockDirectory(${JSON.stringify(path)})
       console.log('held')
       setInterval(() => {}, 1000)`,
    ],
    { stdio: ['ignore', 'pipe', 'inherit'] },
  )
  await new Promise((resolve) => child.stdout.once('data', resolve))
  return async () => {
    const exited = new Promise((resolve) => child.once('exit', resolve))
    child.kill('SIGKILL')
    await exited
    // Its lock's child records the end, then lets the lock go: wait for that (flock(1) waits).
    expect(spawnSync('flock', [path, 'true']).status).toBe(0)
  }
}

// The lock records its holder's end (server/ledger/file-lock.ts), so a restarted coordinator
// knows how long its dead predecessor decided nothing (docs/keys.md, "Restarts and faults").
describe("the lock's record of its holder's end", () => {
  const bootMs = (): number => systemClock.bootMs!()!

  it('tells the next holder when a SIGKILLed holder ended, and when one that released it did', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'sluice-lock-end-'))
    dirs.push(dir)
    const path = join(dir, 'ledger.lock')
    const first = await lockDirectory(path)
    // Nothing held the directory before.
    expect(first.predecessorEndedAtBootMs).toBeUndefined()
    const releasedFromMs = bootMs()
    await first.release()
    const second = await lockDirectory(path)
    // /proc/uptime steps by 10 ms.
    expect(second.predecessorEndedAtBootMs).toBeGreaterThanOrEqual(releasedFromMs - 10)
    expect(second.predecessorEndedAtBootMs).toBeLessThanOrEqual(bootMs())
    await second.release()

    const kill = await holder(path)
    const killedFromMs = bootMs()
    await kill()
    const third = await lockDirectory(path)
    expect(third.predecessorEndedAtBootMs).toBeGreaterThanOrEqual(killedFromMs - 10)
    expect(third.predecessorEndedAtBootMs).toBeLessThanOrEqual(bootMs())
    await third.release()
  }, 30_000)

  it('tells nothing from a record of another holder, or of another boot', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'sluice-lock-end-'))
    dirs.push(dir)
    const path = join(dir, 'ledger.lock')
    const kill = await holder(path)
    await kill()
    const record = readFileSync(`${path}.ended`, 'utf8')
    const [token, bootId, timeNs, uptime, end] = record.trim().split(' ')
    expect(end).toBe('end')
    // The holder that took the lock after the one on record is not the one that ended: a later
    // holder's line in the lock file (it may have decided since) makes the record stale.
    writeFileSync(path, 'pid 1 on elsewhere token another\n')
    const afterOther = await lockDirectory(path)
    expect(afterOther.predecessorEndedAtBootMs).toBeUndefined()
    await afterOther.release()
    // A record of the last holder written under another boot of the machine.
    const last = readFileSync(path, 'utf8').trim().split(' ').at(-1)!
    expect(last).not.toBe(token)
    const otherBoot = bootId!.replace(/^./, (c) => (c === '0' ? '1' : '0'))
    writeFileSync(`${path}.ended`, `${last} ${otherBoot} ${timeNs} ${uptime} end\n`)
    const afterReboot = await lockDirectory(path)
    expect(afterReboot.predecessorEndedAtBootMs).toBeUndefined()
    await afterReboot.release()
    // A record cut short (its holder killed as it wrote): without its `end`.
    const now = readFileSync(path, 'utf8').trim().split(' ').at(-1)!
    writeFileSync(`${path}.ended`, `${now} ${bootId} ${timeNs} ${uptime!.slice(0, 3)}`)
    const afterCut = await lockDirectory(path)
    expect(afterCut.predecessorEndedAtBootMs).toBeUndefined()
    await afterCut.release()
    // The same record whole is taken (so the cases above failed for what they changed).
    writeFileSync(
      `${path}.ended`,
      `${readFileSync(path, 'utf8').trim().split(' ').at(-1)!} ${bootId} ${timeNs} ${uptime} end\n`,
    )
    const whole = await lockDirectory(path)
    expect(whole.predecessorEndedAtBootMs).toBe(Number(uptime) * 1000)
    await whole.release()
  }, 30_000)
})
