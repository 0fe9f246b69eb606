import type { Server as TlsServer } from 'node:tls'
import type { Logger } from 'pino'
import { SluiceError } from '../../shared/index.js'
import {
  loadConfigFile,
  loadTls,
  parseConfig,
  parseConfigText,
  securityDowngrades,
  type Config,
} from '../config/index.js'
import type { Coordinator } from '../coordinator/index.js'
import type { CoordinatorEventEmitter } from './events.js'
import { holdingsKeys } from './holdings-keys.js'

export interface ReloadContext {
  readonly coordinator: Coordinator
  readonly logger: Logger
  readonly events: CoordinatorEventEmitter
  /** The file the config came from; without one, a reload needs a body. */
  readonly configPath: string | undefined
  /** The TLS listener, when the coordinator started with TLS: its certificate rotates on reload. */
  readonly tlsServer: () => TlsServer | undefined
}

export type Reload = (body?: unknown) => Promise<{ resources: number; tenants: number }>

/** The config a reload asks for: the body (YAML, JSON or an object), else the file. */
async function nextConfig(body: unknown, configPath: string | undefined): Promise<Config> {
  if (typeof body === 'string' && body !== '') return parseConfigText(body, 'request body')
  if (body !== undefined && body !== null && body !== '') return parseConfig(body, 'request body')
  if (configPath !== undefined) return loadConfigFile(configPath)
  throw new SluiceError(
    'SLUICE_ERR_CONFIG_INVALID',
    'no config file to reload from; send the config in the body',
  )
}

/**
 * TLS material is re-read on every reload (certificate rotation); a
 * listener started without TLS cannot start serving it without a restart,
 * nor change whether it asks for client certificates.
 */
async function rotateTls(ctx: ReloadContext, next: Config): Promise<void> {
  if (next.server.tls === undefined) return
  const server = ctx.tlsServer()
  if (server === undefined)
    throw new SluiceError(
      'SLUICE_ERR_CONFIG_INVALID',
      'server.tls: this coordinator started without TLS; restart it to serve TLS',
    )
  if (next.server.tls.clientCerts !== ctx.coordinator.config.server.tls?.clientCerts)
    throw new SluiceError(
      'SLUICE_ERR_CONFIG_INVALID',
      'server.tls.clientCerts: changing whether client certificates are required needs a restart',
    )
  const material = await loadTls(next.server.tls)
  server.setSecureContext({
    key: material.key,
    cert: material.cert,
    ...(material.ca === undefined ? {} : { ca: material.ca }),
  })
}

/**
 * The reload policy: a new config is validated whole, refused when it
 * lowers security without `securityDowngrade`, and applied only once every
 * check passed (TLS included); a refused one leaves the old one in force.
 */
export function reloadPolicy(ctx: ReloadContext): Reload {
  const { coordinator, logger, events } = ctx
  return async (body) => {
    try {
      const next = await nextConfig(body, ctx.configPath)
      const lost = securityDowngrades(coordinator.config, next)
      if (lost.length > 0 && !next.server.securityDowngrade)
        throw new SluiceError('SLUICE_ERR_CONFIG_DOWNGRADE', lost.join('; '))
      const keys = holdingsKeys(next, process.env)
      await rotateTls(ctx, next)
      coordinator.applyConfig(next)
      coordinator.setHoldingsKeys(keys)
      const summary = {
        resources: next.resources.length,
        tenants: Object.keys(next.tenants).length,
      }
      events.emit('config-applied', summary)
      return summary
    } catch (error) {
      coordinator.metrics.reloads.inc({ outcome: 'rejected' })
      logger.error({ err: error }, 'config reload refused; the old config stays')
      events.emit('config-rejected', error)
      throw error
    }
  }
}
