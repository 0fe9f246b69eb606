import type { Config } from './schema.js'

/** Something a valid config leaves open that its author may not have meant. */
export interface ConfigWarning {
  /** Where: the template's match or the tenant's name. */
  readonly at: { readonly match: string } | { readonly tenant: string }
  readonly message: string
}

/**
 * What a config leaves open, said whenever one is applied (the coordinator's
 * log) and by `sluice validate`: a tenant without a `resources` list may use
 * every resource; optimistic is the one failure mode that may exceed
 * capacity; a template of capacity 0 refuses everything it matches (a kill
 * switch, valid, but rarely what a first config means).
 */
export function configWarnings(config: Config): ConfigWarning[] {
  const out: ConfigWarning[] = []
  for (const [name, tenant] of Object.entries(config.tenants))
    if (tenant.resources === undefined)
      out.push({
        at: { tenant: name },
        message:
          "tenant without a resources list: it may use every resource (set resources: ['*'] to say so)",
      })
  for (const t of config.resources) {
    if (t.failureMode === 'optimistic')
      out.push({
        at: { match: t.match },
        message:
          'failureMode optimistic: while the parent is unreachable, this coordinator may share out more than the parent leased',
      })
    if (t.capacity === 0)
      out.push({
        at: { match: t.match },
        message: t.keyed
          ? 'capacity 0: every key is refused, whatever it asks (a kill switch); a plan entry (keys: { k: { capacity: 0 } }) refuses one key'
          : 'capacity 0: every request for it is refused (a kill switch)',
      })
  }
  return out
}
