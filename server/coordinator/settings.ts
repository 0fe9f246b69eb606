import { copySettings, type CompiledConfig, type ResourceSettings } from '../config/index.js'
import type { Upstream } from '../tree/index.js'

/**
 * The one place a resource's settings come from: the config's templates,
 * and for a downstream coordinator the capacity its parent leases it now.
 * `lookup` is what the pool reads; it is cached per id (bounded, cleared on
 * reload), since templates are matched by glob.
 */
export class SettingsSource {
  #config: CompiledConfig
  #upstream: Upstream | undefined
  readonly #cache = new Map<string, ResourceSettings | undefined>()
  readonly #maxCached: () => number

  constructor(config: CompiledConfig, maxCached: () => number) {
    this.#config = config
    this.#maxCached = maxCached
  }

  get config(): CompiledConfig {
    return this.#config
  }

  get upstream(): Upstream | undefined {
    return this.#upstream
  }

  setConfig(config: CompiledConfig): void {
    this.#config = config
    this.#cache.clear()
  }

  attachUpstream(upstream: Upstream): void {
    this.#upstream = upstream
  }

  clear(): void {
    this.#cache.clear()
  }

  readonly lookup = (id: string): ResourceSettings | undefined => {
    let settings: ResourceSettings | undefined
    if (this.#cache.has(id)) settings = this.#cache.get(id)
    else {
      settings = this.#config.settingsFor(id)
      // Bounded: ids come from accepted subscriptions; the cache is cleared on reload and capped here.
      if (this.#cache.size >= this.#maxCached()) this.#cache.clear()
      this.#cache.set(id, settings)
    }
    if (settings === undefined || this.#upstream === undefined) return settings
    // Downstream: the capacity is whatever the parent leases us now (0 until it does).
    const up = this.#upstream.capacity(id)
    return copySettings(settings, {
      kind: up?.kind ?? settings.kind,
      capacity: up?.capacity ?? 0,
      burst: up?.burst ?? 0,
      leaseDeadlineMs: up?.deadlineMs,
    })
  }
}
