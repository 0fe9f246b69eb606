import { execFileSync } from 'node:child_process'
import { mkdtempSync, rmSync, statSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterEach, beforeAll, describe, expect, it } from 'vitest'
import { FileLedger } from '../../../server/ledger/index.js'
import { assertBuilt } from '../../helpers/replica.js'

// A real process writing its ledger under a file-size limit (`ulimit -f`, standing in for a full
// disk): writes come back short, then fail. Every write that resolved must be read back after,
// and none that failed.

const dirs: string[] = []
afterEach(() => {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true })
})
beforeAll(() => assertBuilt())

describe('the file ledger on a full disk', () => {
  for (const limitKiB of [2, 8, 24])
    it(`keeps exactly the writes that resolved under a ${limitKiB} KiB file-size limit`, async () => {
      const dir = mkdtempSync(join(tmpdir(), 'sluice-full-'))
      dirs.push(dir)
      const writer = join(process.cwd(), 'dist/bench/faults/ledger-writer.js')
      const out = execFileSync(
        'sh',
        ['-c', `ulimit -f ${limitKiB}; exec "$0" "$1" "$2" 200`, process.execPath, writer, dir],
        { encoding: 'utf8' },
      )
      const { resolved, failed } = JSON.parse(out) as { resolved: number[]; failed: number[] }
      expect(failed.length, 'the limit was reached').toBeGreaterThan(0)
      expect(resolved.length, 'some writes fit').toBeGreaterThan(0)
      expect(statSync(join(dir, 'ledger.log')).size).toBeLessThanOrEqual(limitKiB * 1024)
      const ledger = new FileLedger(dir)
      const loaded = await ledger.load()
      await ledger.close()
      expect(loaded?.map((e) => Number(e.resource.slice(1))).sort((a, b) => a - b)).toEqual(
        resolved,
      )
    })
})
