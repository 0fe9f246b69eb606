import { watch, type FSWatcher } from 'node:fs'
import { basename, dirname } from 'node:path'
import type { Clock, Timer } from '../../shared/index.js'

/**
 * Watches a config file through its directory, so it keeps hearing changes
 * however the file is written: in place, replaced by rename (how editors,
 * Kubernetes ConfigMaps and config-management tools write), or deleted and
 * created again. A burst of events calls `onChange` once, `debounceMs` after
 * the last (on the clock); the caller decides whether the content changed.
 */
export class ConfigFileWatcher {
  readonly #watcher: FSWatcher
  readonly #clock: Clock
  readonly #debounceMs: number
  #timer: Timer | undefined

  constructor(
    path: string,
    clock: Clock,
    debounceMs: number,
    hooks: { changed(): void; settled(): void; failed(error: Error): void },
  ) {
    this.#clock = clock
    this.#debounceMs = debounceMs
    const name = basename(path)
    this.#watcher = watch(dirname(path), (_event, filename) => {
      // A ConfigMap swaps a `..data` symlink; an editor renames a temporary file over ours.
      // Unknown names (some platforms give none) count too: the reload compares contents.
      if (filename !== null && filename !== name && !filename.startsWith('..')) return
      hooks.changed()
      this.#timer?.cancel()
      this.#timer = this.#clock.setTimeout(() => {
        this.#timer = undefined
        hooks.settled()
      }, this.#debounceMs)
    })
    this.#watcher.on('error', (error) => hooks.failed(error))
  }

  close(): void {
    this.#timer?.cancel()
    this.#watcher.close()
  }
}
