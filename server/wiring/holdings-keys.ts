import { SluiceError, describeIssues } from '../../shared/index.js'
import { holdingsKeySchema, type Config, type HoldingsKeyConfig } from '../config/index.js'

/**
 * The holdings key: the config's, else SLUICE_HOLDINGS_KEY (and
 * SLUICE_HOLDINGS_KEY_PREVIOUS, comma-separated), validated like the config.
 */
export function holdingsKeys(
  config: Config,
  env: NodeJS.ProcessEnv,
): HoldingsKeyConfig | undefined {
  if (config.server.holdingsKey !== undefined) return config.server.holdingsKey
  const current = env.SLUICE_HOLDINGS_KEY
  if (current === undefined || current === '') return undefined
  const previous = (env.SLUICE_HOLDINGS_KEY_PREVIOUS ?? '').split(',').filter((k) => k !== '')
  const parsed = holdingsKeySchema.safeParse({ current, previous })
  if (!parsed.success)
    throw new SluiceError(
      'SLUICE_ERR_CONFIG_INVALID',
      `SLUICE_HOLDINGS_KEY / SLUICE_HOLDINGS_KEY_PREVIOUS: ${describeIssues(parsed.error)}`,
    )
  return parsed.data
}
