import { SluiceError, systemClock } from '../../shared/index.js'
import type { ResourceSummary } from '../http/index.js'
import { coordinatorUrl, parseFlags, unreachable } from './flags.js'
import { exitCodes, type CommandIo } from './io.js'
import { formatTable } from './table.js'
import { capacityText, num } from './top/index.js'

const requestTimeoutMs = 5_000

/** Renders resources as an aligned text table. */
export function formatStatusTable(resources: readonly ResourceSummary[]): string {
  if (resources.length === 0) return 'no resource is configured or has clients\n'
  const header = [
    'RESOURCE',
    'KIND',
    'CAPACITY',
    'COMMITTED',
    'FREE',
    'DEMAND',
    'CLIENTS',
    'LEARNING',
  ]
  const rows = resources.map((r) => [
    r.id,
    r.kind,
    r.family === undefined ? num(r.capacity) : capacityText(r),
    num(r.committed),
    num(r.free),
    num(r.demand),
    String(r.clients),
    r.learning ? 'yes' : 'no',
  ])
  return formatTable(header, rows).join('\n') + '\n'
}

/** The flags `sluice status` takes. */
export const statusFlags = ['url', 'token'] as const

/** `sluice status [--url U]`: a table of resources from the coordinator's HTTP API. */
export async function statusCommand(args: readonly string[], io: CommandIo): Promise<number> {
  const { values } = parseFlags('status', args, statusFlags, { min: 0, max: 0 })
  const base = coordinatorUrl(values.url, process.env)
  const token = values.token ?? process.env.SLUICE_TOKEN
  const headers: Record<string, string> =
    token === undefined ? {} : { authorization: `Bearer ${token}` }
  const abort = new AbortController()
  const timer = systemClock.setTimeout(() => abort.abort(), requestTimeoutMs)
  let body: { resources: ResourceSummary[] }
  let readiness: { role?: string; leader?: string | null }
  try {
    const res = await fetch(`${base}/v1/resources`, { signal: abort.signal, headers })
    if (res.status === 401)
      throw new SluiceError(
        'SLUICE_ERR_HTTP_UNAUTHORIZED',
        `${base}: reads need a token: --token (a read, admin or tenant token) or SLUICE_TOKEN`,
      )
    if (!res.ok) throw new Error(`HTTP ${res.status}`)
    body = (await res.json()) as { resources: ResourceSummary[] }
    // 503 on a follower is an answer, not a failure.
    readiness = (await (await fetch(`${base}/readyz`, { signal: abort.signal })).json()) as {
      role?: string
      leader?: string | null
    }
  } catch (error) {
    if (error instanceof SluiceError) throw error
    throw unreachable(base, error)
  } finally {
    timer.cancel()
  }
  // A follower holds no leases: say so, and where the leader is, rather than print an empty table.
  if (readiness.role === 'follower') {
    io.stdout.write(
      `this replica follows; the leader is ${readiness.leader ?? 'not known yet'}: ask it with --url\n`,
    )
  }
  io.stdout.write(formatStatusTable(body.resources))
  return exitCodes.ok
}
