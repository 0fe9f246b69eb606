import type { Logger } from 'pino'
import { formatError } from '../../shared/index.js'
import { configWarnings, type Config } from '../config/index.js'
import type { Core } from './core.js'

/**
 * A new config (already validated, already the settings' source) applied to
 * the resources in the pool: each takes its new settings into its next round
 * through the normal safe path; one no template matches any more drains to 0,
 * and its clients are told.
 */
export function reapply(core: Core, config: Config): void {
  const { pool } = core
  for (const id of pool.resourceIds()) {
    if (!pool.refreshSettings(id)) {
      for (const clientId of pool.subscribers(id)) {
        core.sessions.send(clientId, {
          type: 'error',
          code: 'SLUICE_ERR_RESOURCE_UNKNOWN',
          message: formatError(
            'SLUICE_ERR_RESOURCE_UNKNOWN',
            'resource no longer in config; its capacity is now 0',
          ),
          resource: id,
        })
      }
    }
    core.rounds.reloaded(id, pool.settings(id)!.refreshMs)
  }
  warnConfig(config, core.log)
  core.metrics.reloads.inc({ outcome: 'applied' })
  core.log.info(
    { resources: config.resources.length, tenants: Object.keys(config.tenants).length },
    'config applied',
  )
}

/** Logs what a config leaves open (configWarnings), whenever one is applied. */
export function warnConfig(config: Config, log: Logger): void {
  for (const w of configWarnings(config)) log.warn(w.at, w.message)
}
