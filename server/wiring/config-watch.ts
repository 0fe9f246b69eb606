import { readFile } from 'node:fs/promises'
import type { Logger } from 'pino'
import type { Clock } from '../../shared/index.js'
import { ConfigFileWatcher } from '../config/index.js'
import type { CoordinatorEventEmitter } from './events.js'
import type { Reload } from './reload.js'

/**
 * Reloads when the config file changes. Editors write in several steps:
 * reload once things settle (200 ms on the clock), and only if the text
 * changed.
 */
export async function watchConfigFile(
  configPath: string,
  clock: Clock,
  logger: Logger,
  events: CoordinatorEventEmitter,
  reload: Reload,
): Promise<ConfigFileWatcher> {
  let lastText = await readFile(configPath, 'utf8').catch(() => undefined)
  return new ConfigFileWatcher(configPath, clock, 200, {
    changed: () => events.emit('config-file-changed'),
    settled: () => {
      readFile(configPath, 'utf8')
        .then((text) => {
          if (text === lastText) return
          lastText = text
          return reload()
        })
        .catch(() => undefined)
    },
    failed: (error) =>
      logger.warn({ err: error }, 'config watch failed; reload by SIGHUP or the admin API'),
  })
}
