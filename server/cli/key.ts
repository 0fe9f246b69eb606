import { SluiceError, systemClock } from '../../shared/index.js'
import type { KeyLookup } from '../pool/index.js'
import { coordinatorUrl, parseFlags, unreachable } from './flags.js'
import { exitCodes, type CommandIo } from './io.js'
import { formatTable } from './table.js'
import { num } from './top/index.js'

const requestTimeoutMs = 5_000

/** The flags `sluice key` takes. */
export const keyFlags = ['url', 'token', 'reset'] as const

/** A key as text: its limit, its window, who may use how much of it, and what was used. */
export function formatKey(k: KeyLookup): string {
  const unit = k.kind === 'quota' ? 'a window' : k.kind === 'concurrency' ? 'slots' : 'tokens/s'
  const lines = [
    `${k.family.slice(0, -2)} ${k.key}: ${k.kind}, ${num(k.capacity)} ${unit}` +
      (k.kind === 'rate' ? `, burst ${num(k.burst)}` : ''),
  ]
  if (k.window !== undefined)
    lines.push(
      `window ${k.window.index}: ${Math.round(k.window.lengthMs / 1000)} s, ends in ${Math.ceil(k.window.endsInMs / 1000)} s`,
    )
  lines.push(
    k.holders.length === 0
      ? 'no process holds any of it now'
      : k.leasedOnItsOwn
        ? `leased on its own to ${k.holders.length} process(es)`
        : `decided by ${k.holders.length} process(es) on their default share`,
  )
  const givenBack = k.reset?.givenBack ?? 0
  if (k.reset?.pending === true)
    lines.push('reset asked: it takes effect once the holders say what they spent')
  if (k.used !== undefined)
    lines.push(
      givenBack > 0
        ? `used ${num(k.used)} of ${num(k.capacity)} + ${num(givenBack)} given back by a reset in the window`
        : `used ${num(k.used)} of ${num(k.capacity)} in the window`,
    )
  else if (k.kind === 'quota')
    lines.push(
      'used: not reported (each process counts its own share of a key not leased on its own)',
    )
  const header = ['CLIENT', 'TENANT', 'CONNECTED', 'MAY USE', 'COMMITTED', 'USED']
  const rows = k.holders.map((h) => [
    h.client,
    h.tenant ?? '-',
    h.connected ? 'yes' : 'no',
    num(h.capacity),
    num(h.committed),
    h.used === undefined ? '-' : num(h.used),
  ])
  if (rows.length > 0) lines.push('', ...formatTable(header, rows))
  return lines.join('\n') + '\n'
}

/**
 * `sluice key <family> <key> [--reset]`: one key of a keyed family, from the coordinator's
 * HTTP API; with --reset, a keyed quota's key gets its whole budget again, a rate key a full
 * bucket (POST /v1/key/reset, the admin token), and the key is printed as it then stands.
 */
export async function keyCommand(args: readonly string[], io: CommandIo): Promise<number> {
  const { values, positionals } = parseFlags('key', args, keyFlags, { min: 2, max: 2 })
  const [family, key] = positionals as [string, string]
  const base = coordinatorUrl(values.url, process.env)
  const token = values.token ?? process.env.SLUICE_TOKEN
  const headers: Record<string, string> =
    token === undefined ? {} : { authorization: `Bearer ${token}` }
  if (values.reset === true) {
    const reset = await call(base, '/v1/key/reset', {
      method: 'POST',
      headers: { ...headers, 'content-type': 'application/json' },
      body: JSON.stringify({ family, key }),
    })
    if (reset.status === 401 || reset.status === 403)
      throw new SluiceError(
        'SLUICE_ERR_HTTP_UNAUTHORIZED',
        `${base}: a reset needs the admin token: --token or SLUICE_TOKEN`,
      )
    if (!reset.ok) return failed(io, reset)
    const r = reset.body as {
      reset: string
      takesEffectWithinMs?: number
      holders?: number
      detail?: string
    }
    io.stdout.write(
      r.reset === 'pending'
        ? `reset: ${family} ${key} has its whole budget again within ${Math.ceil((r.takesEffectWithinMs ?? 0) / 1000)} s (once its holders say what they spent)\n`
        : r.reset === 'refilled'
          ? `reset: ${family} ${key} has a full bucket again (sent to ${r.holders ?? 0} holders)\n`
          : `reset: ${r.detail ?? r.reset}\n`,
    )
  }
  const query = new URLSearchParams({ family, key })
  const res = await call(base, `/v1/key?${query.toString()}`, { headers })
  if (res.status === 401 || res.status === 403)
    throw new SluiceError(
      'SLUICE_ERR_HTTP_UNAUTHORIZED',
      `${base}: keys need the read or admin token: --token or SLUICE_TOKEN`,
    )
  if (!res.ok) return failed(io, res)
  io.stdout.write(formatKey(res.body as KeyLookup))
  return exitCodes.ok
}

/** One request to the coordinator, its status and JSON body; unreachable within the timeout. */
async function call(
  base: string,
  path: string,
  init: RequestInit,
): Promise<{ status: number; ok: boolean; body: unknown }> {
  const abort = new AbortController()
  const timer = systemClock.setTimeout(() => abort.abort(), requestTimeoutMs)
  try {
    const res = await fetch(`${base}${path}`, { ...init, signal: abort.signal })
    return { status: res.status, ok: res.ok, body: await res.json() }
  } catch (error) {
    throw unreachable(base, error)
  } finally {
    timer.cancel()
  }
}

function failed(io: CommandIo, res: { status: number; body: unknown }): number {
  const error = (res.body as { error?: { message?: string } }).error
  io.stderr.write(`sluice key: ${error?.message ?? `HTTP ${res.status}`}\n`)
  return exitCodes.failure
}
