import { spawnSync } from 'node:child_process'
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterEach, describe, expect, it } from 'vitest'

// .ci/summary.mjs: the closing `N passed, N failed` line CI prints from vitest's JSON reports.

const dirs: string[] = []
afterEach(() => {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true })
})

function summary(...reports: unknown[]): { out: string; status: number | null } {
  const dir = mkdtempSync(join(tmpdir(), 'sluice-summary-'))
  dirs.push(dir)
  const files = reports.map((r, i) => {
    const file = join(dir, `${i}.json`)
    writeFileSync(file, JSON.stringify(r))
    return file
  })
  const run = spawnSync(process.execPath, ['.ci/summary.mjs', ...files], { encoding: 'utf8' })
  return { out: run.stdout, status: run.status }
}

const passing = {
  numPassedTests: 2,
  numFailedTests: 0,
  testResults: [
    {
      name: 'b.test.ts',
      status: 'passed',
      assertionResults: [
        { status: 'passed', fullName: 'one' },
        { status: 'passed', fullName: 'two' },
      ],
    },
  ],
}

describe('the CI summary line', () => {
  it('sums the reports of both Node versions', () => {
    const { out, status } = summary(passing, passing)
    expect(out.trim().split('\n').at(-1)).toBe('4 passed, 0 failed')
    expect(status).toBe(0)
  })

  it('counts a file whose beforeAll failed (its tests skipped) as a failure', () => {
    const { out, status } = summary(passing, {
      numPassedTests: 0,
      numFailedTests: 0,
      numPendingTests: 2,
      testResults: [
        {
          name: 'a.test.ts',
          status: 'failed',
          message: 'beforeAll: cannot start etcd',
          assertionResults: [
            { status: 'skipped', fullName: 'x' },
            { status: 'skipped', fullName: 'y' },
          ],
        },
      ],
    })
    expect(out).toContain('FAILED a.test.ts: beforeAll: cannot start etcd')
    expect(out.trim().split('\n').at(-1)).toBe('2 passed, 1 failed, 2 skipped')
    expect(status).toBe(1)
  })

  it('fails a run that tested nothing, and one with no report', () => {
    expect(summary({ numPassedTests: 0, numFailedTests: 0, testResults: [] }).status).toBe(1)
    const missing = spawnSync(process.execPath, ['.ci/summary.mjs', '/nonexistent.json'], {
      encoding: 'utf8',
    })
    expect(missing.stdout).toContain('vitest did not run')
    expect(missing.status).toBe(1)
  })
})
