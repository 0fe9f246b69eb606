import { readFileSync } from 'node:fs'
import { describe, expect, it } from 'vitest'
import { SluiceError, errorCatalogue, isErrorCode, type ErrorSpec } from '../../shared/index.js'

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
