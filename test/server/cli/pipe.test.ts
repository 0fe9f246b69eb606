import { spawn } from 'node:child_process'
import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { describe, expect, it } from 'vitest'
import { assertBuilt, cli } from '../../helpers/replica.js'

describe('the sluice command behind a pipe', () => {
  it('ends quietly, with its own exit code, when the reader stops reading (| head)', async () => {
    assertBuilt()
    const out = await mkdtemp(join(tmpdir(), 'sluice-pipe-'))
    try {
      const child = spawn(
        process.execPath,
        // Two scenarios: the second's summary is written after the reader has gone.
        [cli, 'simulate', ...Array(2).fill('examples/scenarios/demand-step.yaml'), '--out', out],
        { stdio: ['ignore', 'pipe', 'pipe'] },
      )
      let stderr = ''
      child.stderr.on('data', (d: Buffer) => (stderr += d.toString()))
      // As `head -1` does: read the first chunk, then close the pipe.
      child.stdout.once('data', () => child.stdout.destroy())
      const code = await new Promise<number | null>((resolve) => child.once('exit', resolve))
      expect(stderr).not.toMatch(/EPIPE|Error/)
      expect(code).toBe(0)
    } finally {
      await rm(out, { recursive: true, force: true })
    }
  })
})
