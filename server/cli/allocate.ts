import { SluiceError } from '../../shared/index.js'
import { allocate, grantsById, parseAllocationInput } from '../allocation/index.js'
import { exitCodes, readAll, type CommandIo } from './io.js'

/** Largest scenario `sluice allocate` reads: 256 MiB, about two million clients. */
export const maxScenarioBytes = 256 * 1024 * 1024

/** `sluice allocate`: one JSON scenario on stdin → `{"grants": {...}}` on stdout. */
export async function allocateCommand(args: readonly string[], io: CommandIo): Promise<number> {
  if (args.length > 0) {
    throw new SluiceError(
      'SLUICE_ERR_CLI_USAGE',
      `allocate takes no arguments (it reads stdin), received ${args.join(' ')}`,
    )
  }
  let text: string
  try {
    text = await readAll(io.stdin, maxScenarioBytes)
  } catch (error) {
    throw new SluiceError('SLUICE_ERR_CLI_INPUT', (error as Error).message, { cause: error })
  }
  const scenario = parseAllocationInput(text)
  const result = allocate(scenario)
  io.stdout.write(`${JSON.stringify({ grants: grantsById(result) })}\n`)
  return exitCodes.ok
}
