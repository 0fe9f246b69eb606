// Prints vitest's totals from its JSON reporter(s) as the plain closing line
// `N passed, N failed` (summed over every report given: one per Node version).
import { readFileSync } from 'node:fs'
import { relative } from 'node:path'

const files = process.argv.length > 2 ? process.argv.slice(2) : ['test-results/vitest.json']
let passed = 0
let failed = 0
let skipped = 0
let failedFiles = 0
let ok = true
for (const file of files) {
  let report
  try {
    report = JSON.parse(readFileSync(file, 'utf8'))
  } catch {
    console.log(`${file}: vitest did not run (typecheck or lint failed first), so no test totals`)
    ok = false
    continue
  }
  // Name every failed test (and its first lines) just above the totals, so the tail of a
  // red run says what failed without scrolling back through the whole log.
  for (const suite of report.testResults ?? []) {
    for (const test of suite.assertionResults ?? []) {
      if (test.status !== 'failed') continue
      console.log(`FAILED ${relative(process.cwd(), suite.name)}: ${test.fullName}`)
      for (const message of (test.failureMessages ?? []).slice(0, 1)) {
        console.log(
          message
            .split('\n')
            .slice(0, 12)
            .map((line) => `  ${line}`)
            .join('\n'),
        )
      }
    }
    // A file that failed with no failed test (it did not load, or a beforeAll threw and its
    // tests show as skipped) counts as one failure: a red file never reads as green.
    if (
      suite.status === 'failed' &&
      !(suite.assertionResults ?? []).some((test) => test.status === 'failed')
    ) {
      failedFiles++
      console.log(
        `FAILED ${relative(process.cwd(), suite.name)}: ${String(suite.message ?? '')
          .split('\n')
          .slice(0, 6)
          .join(' ')}`,
      )
    }
  }
  passed += report.numPassedTests ?? 0
  failed += (report.numFailedTests ?? 0) + (report.numRuntimeErrors ?? 0)
  skipped += (report.numPendingTests ?? 0) + (report.numTodoTests ?? 0)
}
failed += failedFiles
console.log(`${passed} passed, ${failed} failed${skipped > 0 ? `, ${skipped} skipped` : ''}`)
process.exit(!ok || failed > 0 || passed === 0 ? 1 : 0)
