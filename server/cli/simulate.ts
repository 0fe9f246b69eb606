import { mkdir, writeFile } from 'node:fs/promises'
import { join } from 'node:path'
import { loadScenarioFile, simulate, toCsv, toJson, toSvg, toTable } from '../sim/index.js'
import { parseFlags } from './flags.js'
import { exitCodes, type CommandIo } from './io.js'

/**
 * `sluice simulate FILE... [--out DIR]`: runs each scenario on a virtual
 * clock, prints its summary, and writes DIR/<name>.csv, .json and one
 * .svg per resource. Exit 1 when a scenario's `expect` fails.
 */
export async function simulateCommand(args: readonly string[], io: CommandIo): Promise<number> {
  const { values, positionals } = parseFlags('simulate', args, ['out'], { min: 1, max: 1000 })
  const out = values.out ?? 'sim-results'
  await mkdir(out, { recursive: true })
  let failed = false
  for (const file of positionals) {
    const scenario = await loadScenarioFile(file)
    const result = simulate(scenario)
    if (result.rows.length > 0) await writeFile(join(out, `${scenario.name}.csv`), toCsv(result))
    await writeFile(join(out, `${scenario.name}.json`), toJson(result) + '\n')
    for (const r of result.summary.resources) {
      const suffix =
        result.summary.resources.length === 1
          ? ''
          : `.${r.resource.replace(/[^A-Za-z0-9._-]/g, '_')}`
      await writeFile(join(out, `${scenario.name}${suffix}.svg`), toSvg(result, r.resource))
    }
    io.stdout.write(toTable(result) + '\n')
    if (result.summary.checks.some((c) => !c.ok)) failed = true
  }
  io.stdout.write(`results in ${out}/\n`)
  return failed ? exitCodes.failure : exitCodes.ok
}
