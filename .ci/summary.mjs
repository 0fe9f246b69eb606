// Prints vitest's totals from its JSON reporter(s) as the plain closing line
// `N passed, N failed` (summed over every report given: one per Node version).
import { readFileSync } from 'node:fs'

const files = process.argv.length > 2 ? process.argv.slice(2) : ['test-results/vitest.json']
let passed = 0
let failed = 0
let skipped = 0
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
  passed += report.numPassedTests ?? 0
  failed += (report.numFailedTests ?? 0) + (report.numRuntimeErrors ?? 0)
  skipped += (report.numPendingTests ?? 0) + (report.numTodoTests ?? 0)
}
console.log(`${passed} passed, ${failed} failed${skipped > 0 ? `, ${skipped} skipped` : ''}`)
process.exit(!ok || failed > 0 || passed === 0 ? 1 : 0)
