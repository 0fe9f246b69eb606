// Prints vitest's totals from its JSON reporter as the plain closing line `N passed, N failed`.
import { readFileSync } from 'node:fs'

const file = process.argv[2] ?? 'test-results/vitest.json'
let report
try {
  report = JSON.parse(readFileSync(file, 'utf8'))
} catch {
  console.log('vitest did not run (typecheck or lint failed first), so no test totals')
  console.log('0 passed, 0 failed')
  process.exit(1)
}
const passed = report.numPassedTests ?? 0
const failed = (report.numFailedTests ?? 0) + (report.numRuntimeErrors ?? 0)
const skipped = (report.numPendingTests ?? 0) + (report.numTodoTests ?? 0)
console.log(`${passed} passed, ${failed} failed${skipped > 0 ? `, ${skipped} skipped` : ''}`)
process.exit(failed > 0 || passed === 0 ? 1 : 0)
