import WebSocket from 'ws'

/**
 * A hostile tenant, for the flood test: `node flood.js SPEC_JSON`. It opens
 * `sockets` connections with a valid tenant token and sends, as fast as the
 * message limit allows, demand frames full of resource ids its tenant may
 * not use, or (`decide`: a keyed family's prefix its tenant may use) remote
 * decisions asking for new keys of that family in every frame; with `read:
 * false` it never reads what comes back. Reconnects whenever it is closed.
 * Bounded: it stops after `durationMs`. Prints one JSON line: frames sent,
 * closes seen by code.
 */
interface FloodSpec {
  readonly url: string
  readonly token: string
  readonly sockets: number
  readonly entriesPerFrame: number
  readonly framesPerSec: number
  readonly read: boolean
  readonly durationMs: number
  readonly decide?: string | undefined
}

const spec = JSON.parse(process.argv[2] ?? '{}') as FloodSpec
const stopAt = Date.now() + spec.durationMs
let frames = 0
let asked = 0
const closes: Record<string, number> = {}
const demandFrame = JSON.stringify({
  type: 'demand',
  resources: Array.from({ length: spec.entriesPerFrame }, (_, i) => ({
    resource: `forbidden/${i}`,
    wants: 1,
  })),
})
/** Every decide frame asks for keys never asked before. */
const frame = (): string => {
  if (spec.decide === undefined) return demandFrame
  const asks = Array.from({ length: spec.entriesPerFrame }, (_, i) => [
    asked + i,
    `${spec.decide}/k${asked + i}`,
    1,
  ])
  asked += asks.length
  return JSON.stringify({ type: 'decide', asks })
}

function open(n: number): void {
  if (Date.now() >= stopAt) return
  const ws = new WebSocket(spec.url, { headers: { authorization: `Bearer ${spec.token}` } })
  let timer: NodeJS.Timeout | undefined
  ws.on('open', () => {
    if (!spec.read) (ws as unknown as { _socket: { pause(): void } })._socket.pause()
    ws.send(JSON.stringify({ type: 'hello', v: 1, clientId: `flood-${n}` }))
    timer = setInterval(() => {
      if (Date.now() >= stopAt) return ws.terminate()
      if (ws.readyState !== WebSocket.OPEN) return
      ws.send(frame())
      frames++
    }, 1000 / spec.framesPerSec)
  })
  ws.on('error', () => undefined)
  ws.on('close', (code) => {
    clearInterval(timer)
    closes[code] = (closes[code] ?? 0) + 1
    setTimeout(() => open(n), 50)
  })
}

for (let i = 0; i < spec.sockets; i++) open(i)
setTimeout(() => {
  process.stdout.write(`${JSON.stringify({ frames, asked, closes })}\n`)
  process.exit(0)
}, spec.durationMs + 500)
