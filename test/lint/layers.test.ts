import { Linter } from 'eslint'
import { describe, expect, it } from 'vitest'
// @ts-expect-error: a plain JS config module, without types
import { layers } from '../../eslint.layers.js'
import * as library from '../../server/index.js'

const linter = new Linter({ configType: 'flat', cwd: process.cwd() })
const config = [
  { files: ['**/*.ts'], languageOptions: { sourceType: 'module' as const } },
  ...(layers as Linter.Config[]),
]

/** The messages lint gives one import line in a file at `path`. */
function lint(path: string, source: string): string[] {
  return linter
    .verify(`import { x } from '${source}'\nexport const y = x\n`, config, { filename: path })
    .map((m) => m.message)
}

describe('layers (lint)', () => {
  it('keeps the applications out of the coordinator library', () => {
    expect(lint('server/coordinator/a.ts', '../sim/index.js')).toHaveLength(1)
    expect(lint('server/create.ts', './cli/index.js')).toHaveLength(1)
    expect(lint('server/sim/a.ts', '../cli/index.js')).toHaveLength(1)
    expect(lint('server/cli/a.ts', '../sim/index.js')).toEqual([])
  })

  it('keeps client/ below server/ and shared/ below both', () => {
    expect(lint('client/a.ts', '../server/index.js')).toHaveLength(1)
    expect(lint('shared/a.ts', '../client/index.js')).toHaveLength(1)
    expect(lint('shared/protocol/a.ts', '../../server/index.js')).toHaveLength(1)
    expect(lint('server/tree/a.ts', '../../client/index.js')).toEqual([])
  })

  it('imports another folder only through its index', () => {
    expect(lint('server/coordinator/a.ts', '../pool/pool.js')).toHaveLength(1)
    expect(lint('client/a.ts', './limiters/token-bucket.js')).toHaveLength(1)
    expect(lint('server/coordinator/a.ts', '../pool/index.js')).toEqual([])
    expect(lint('server/coordinator/a.ts', './view.js')).toEqual([])
    expect(lint('client/http/a.ts', '../resource.js')).toEqual([])
  })

  it('keeps the limiters standing alone, and observability off the coordinator', () => {
    expect(lint('shared/limiters/a.ts', '../clock.js')).toEqual([])
    expect(lint('shared/limiters/a.ts', '../errors.js')).toEqual([])
    expect(lint('shared/limiters/a.ts', '../protocol/index.js')).toHaveLength(1)
    expect(lint('shared/limiters/a.ts', '../index.js')).toHaveLength(1)
    expect(lint('shared/limiters/a.ts', '../../client/index.js')).not.toEqual([])
    expect(lint('server/observe/a.ts', '../coordinator/index.js')).toHaveLength(1)
    expect(lint('server/observe/a.ts', '../pool/index.js')).toEqual([])
  })

  it('keeps tests, benchmarks and examples out of the library', () => {
    expect(lint('server/pool/a.ts', '../../test/helpers/wait.js')).toContainEqual(
      expect.stringContaining('no benchmark, example or test'),
    )
  })

  it('exports the coordinator library from sluice/server, and no application', () => {
    expect(Object.keys(library)).toContain('createCoordinator')
    expect(Object.keys(library)).not.toContain('runCli')
    expect(Object.keys(library)).not.toContain('simulate')
  })
})
