import { spawn, spawnSync } from 'node:child_process'
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterEach, beforeAll, describe, expect, it } from 'vitest'
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
