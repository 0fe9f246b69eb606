import { z } from 'zod'
import { SluiceError, describeIssues } from '../../shared/index.js'
import { algorithms, surplusPolicies, type AllocationProblem } from './types.js'

/**
 * The JSON problem `sluice allocate` reads: the shape only. Value rules
 * (ranges, duplicate ids, known tenants) are the engine's own, so they read
 * the same from every entry point.
 */
export const allocationInputSchema = z.strictObject({
  capacity: z.number(),
  algorithm: z.enum(algorithms).optional(),
  surplus: z.enum(surplusPolicies).optional(),
  tenants: z
    .record(
      z.string(),
      z.strictObject({ weight: z.number().optional(), cap: z.number().optional() }),
    )
    .optional(),
  clients: z.array(
    z.strictObject({
      id: z.string(),
      wants: z.number(),
      weight: z.number().optional(),
      priority: z.number().optional(),
      tenant: z.string().optional(),
    }),
  ),
})

/** Parses an allocation problem from JSON text; throws SLUICE_ERR_CLI_INPUT naming the field. */
export function parseAllocationInput(text: string): AllocationProblem {
  let json: unknown
  try {
    json = JSON.parse(text)
  } catch (error) {
    throw new SluiceError('SLUICE_ERR_CLI_INPUT', `stdin is not JSON (${(error as Error).message})`)
  }
  const result = allocationInputSchema.safeParse(json)
  if (!result.success) {
    throw new SluiceError('SLUICE_ERR_CLI_INPUT', describeIssues(result.error))
  }
  return result.data
}
