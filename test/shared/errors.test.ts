import { readFileSync, readdirSync } from 'node:fs'
import { join } from 'node:path'
import { describe, expect, it } from 'vitest'
import {
  SluiceError,
  closeCodeOf,
  codeOfClose,
  errorCatalogue,
  formatError,
  isErrorCode,
  type ErrorCode,
  type ErrorSpec,
} from '../../shared/index.js'

// docs/errors.md rows: | `CODE` | retryable | close code | meaning |
function documented(): Map<string, { retryable: string; closeCode: string }> {
  const text = readFileSync(new URL('../../docs/errors.md', import.meta.url), 'utf8')
  const rows = new Map<string, { retryable: string; closeCode: string }>()
  for (const line of text.split('\n')) {
    const match = /^\|\s*`(SLUICE_ERR_[A-Z0-9_]+)`\s*\|\s*([^|]*?)\s*\|\s*([^|]*?)\s*\|/.exec(line)
    if (match) rows.set(match[1]!, { retryable: match[2]!, closeCode: match[3]! })
  }
  return rows
}

/** Every source file of the library and the applications, as text. */
function sources(): string {
  const root = new URL('../../', import.meta.url).pathname
  const texts: string[] = []
  const walk = (dir: string): void => {
    for (const entry of readdirSync(join(root, dir), { withFileTypes: true })) {
      const path = join(dir, entry.name)
      if (entry.isDirectory()) walk(path)
      else if (path.endsWith('.ts') && path !== join('shared', 'errors.ts'))
        texts.push(readFileSync(join(root, path), 'utf8'))
    }
  }
  for (const dir of ['shared', 'client', 'server']) walk(dir)
  return texts.join('\n')
}

describe('error catalogue', () => {
  const docs = documented()
  const codes = Object.keys(errorCatalogue)

  it('documents every code in docs/errors.md', () => {
    expect(codes.filter((code) => !docs.has(code))).toEqual([])
  })

  it('has a code for every code docs/errors.md lists', () => {
    expect([...docs.keys()].filter((code) => !isErrorCode(code))).toEqual([])
  })

  it('agrees with the docs on retryable and close code', () => {
    for (const [code, spec] of Object.entries(errorCatalogue) as Array<[string, ErrorSpec]>) {
      const row = docs.get(code)!
      expect(row.retryable, code).toBe(spec.retryable ? 'yes' : 'no')
      expect(row.closeCode, code).toBe(spec.closeCode === undefined ? '—' : String(spec.closeCode))
    }
  })

  it('names every code SLUICE_ERR_<AREA>_<WHAT> and gives wire codes a 4xxx close code', () => {
    for (const [code, spec] of Object.entries(errorCatalogue) as Array<[string, ErrorSpec]>) {
      expect(code).toMatch(/^SLUICE_ERR_[A-Z0-9]+_[A-Z0-9_]+$/)
      if (spec.closeCode !== undefined) expect(spec.closeCode).toBeGreaterThanOrEqual(4000)
      if (spec.closeCode !== undefined) expect(spec.closeCode).toBeLessThan(5000)
    }
  })

  it('has no code that nothing raises', () => {
    const text = sources()
    expect(codes.filter((code) => !text.includes(`'${code}'`))).toEqual([])
  })

  it('maps close codes to error codes and back', () => {
    for (const code of codes as ErrorCode[]) {
      const close = (errorCatalogue[code] as ErrorSpec).closeCode
      if (close === undefined) expect(closeCodeOf(code)).toBe(4500)
      else expect(codeOfClose(close)).toBe(code)
    }
    expect(codeOfClose(1006)).toBeUndefined()
  })

  it('rebuilds an error sent over the wire with its code, detail and resource', () => {
    const sent = formatError('SLUICE_ERR_RESOURCE_UNKNOWN', 'no resource template matches "x"')
    const error = SluiceError.fromWire('SLUICE_ERR_RESOURCE_UNKNOWN', sent, 'x')
    expect(error).toBeInstanceOf(SluiceError)
    expect(error.message).toBe(sent)
    expect(error.detail).toBe('no resource template matches "x"')
    expect(error.resource).toBe('x')
    expect(error.retryable).toBe(false)
  })

  it('builds errors carrying the code, the retryable flag and the detail', () => {
    const error = new SluiceError(
      'SLUICE_ERR_ALLOC_INVALID_NUMBER',
      'capacity must be ≥ 0, received -1',
    )
    expect(error.code).toBe('SLUICE_ERR_ALLOC_INVALID_NUMBER')
    expect(error.retryable).toBe(false)
    expect(error.message).toBe(
      'allocation input has a number out of range: capacity must be ≥ 0, received -1',
    )
    expect(error).toBeInstanceOf(Error)
  })
})
