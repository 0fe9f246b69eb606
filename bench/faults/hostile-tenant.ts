import WebSocket from 'ws'

/**
 * A hostile tenant that speaks the protocol itself (no client library to
 * keep it honest): `node hostile-tenant.js SPEC_JSON`. Each of `sockets`
 * connections says hello with the tenant's token, then every `periodMs`
 * reports what the spec says (in frames of at most 40 KB), and
 * acknowledges every lease it is sent, so it holds what it is leased as a
 * real client would. Reconnects when closed. Stops by itself after
 * `durationMs` and prints one JSON line: reports sent, leases received,
 * closes and error replies by code.
 */
export interface HostileTenantSpec {
  readonly url: string
  readonly token: string
  readonly clientPrefix: string
  readonly sockets: number
  readonly periodMs: number
  readonly durationMs: number
  /** Reports the family `<prefix>/*` with this much traffic (asks per second). */
  readonly family?: { readonly prefix: string; readonly traffic: number } | undefined
  /**
   * Reports `count` keys of `prefix` per socket, each `length` characters long, as wanted at
   * `wants` per second (keys distinct across sockets).
   */
  readonly keys?:
    | {
        readonly prefix: string
        readonly count: number
        readonly length: number
        readonly wants: number
      }
    | undefined
  /** Reports `used` of quota `resource` in the window of the last lease of it (a lie). */
  readonly used?:
    { readonly resource: string; readonly used: number; readonly wants: number } | undefined
}

const spec = JSON.parse(process.argv[2] ?? '{}') as HostileTenantSpec
const stopAt = Date.now() + spec.durationMs
let reports = 0
let leases = 0
const closes: Record<string, number> = {}
const errors: Record<string, number> = {}

function keyName(socket: number, i: number, length: number): string {
  const base = `h${socket}-${i}-`
  return base + 'x'.repeat(Math.max(0, length - base.length))
}

function open(n: number): void {
  if (Date.now() >= stopAt) return
  const ws = new WebSocket(spec.url, { headers: { authorization: `Bearer ${spec.token}` } })
  let timer: NodeJS.Timeout | undefined
  let window: number | undefined
  const report = (): void => {
    if (Date.now() >= stopAt) return ws.terminate()
    if (ws.readyState !== WebSocket.OPEN) return
    const entries: Record<string, unknown>[] = []
    if (spec.family !== undefined)
      entries.push({ resource: `${spec.family.prefix}/*`, wants: spec.family.traffic })
    if (spec.keys !== undefined)
      for (let i = 0; i < spec.keys.count; i++)
        entries.push({
          resource: `${spec.keys.prefix}/${keyName(n, i, spec.keys.length)}`,
          wants: spec.keys.wants,
        })
    if (spec.used !== undefined)
      entries.push({
        resource: spec.used.resource,
        wants: spec.used.wants,
        ...(window === undefined ? {} : { used: spec.used.used, window }),
      })
    // Frames within the coordinator's 64 KiB (a larger one closes this connection, not others).
    const per = Math.max(1, Math.floor(40_000 / (spec.keys?.length ?? 100)))
    for (let i = 0; i < entries.length; i += per) {
      ws.send(JSON.stringify({ type: 'demand', resources: entries.slice(i, i + per) }))
      reports++
    }
  }
  ws.on('open', () => {
    ws.send(
      JSON.stringify({
        type: 'hello',
        v: 1,
        clientId: `${spec.clientPrefix}-${n}`,
        token: spec.token,
      }),
    )
  })
  ws.on('message', (data: Buffer) => {
    const msg = JSON.parse(data.toString()) as {
      type: string
      seq?: number
      code?: string
      leases?: { resource: string; window?: { index: number } }[]
    }
    if (msg.type === 'welcome') {
      report()
      timer = setInterval(report, spec.periodMs)
    } else if (msg.type === 'lease') {
      leases += msg.leases?.length ?? 0
      for (const l of msg.leases ?? [])
        if (l.resource === spec.used?.resource && l.window !== undefined) window = l.window.index
      ws.send(JSON.stringify({ type: 'ack', seq: msg.seq }))
    } else if (msg.type === 'error' && msg.code !== undefined)
      errors[msg.code] = (errors[msg.code] ?? 0) + 1
  })
  ws.on('error', () => undefined)
  ws.on('close', (code) => {
    clearInterval(timer)
    closes[code] = (closes[code] ?? 0) + 1
    setTimeout(() => open(n), 100)
  })
}

for (let i = 0; i < spec.sockets; i++) open(i)
setTimeout(() => {
  process.stdout.write(`${JSON.stringify({ reports, leases, closes, errors })}\n`)
  process.exit(0)
}, spec.durationMs + 500)
