import { createHash } from 'node:crypto'
import { createServer } from 'node:http'
import type { Duplex } from 'node:stream'
import { WebSocketServer } from 'ws'

/**
 * The floor under the coordinator benchmark: a server that answers the load
 * generator the way a coordinator does (a welcome to each hello, a lease to
 * every fourth report, as lease renewal does with the default lease life)
 * and does no other work. `BENCH_FLOOR=net|ws|ws-json npm run bench --
 * coordinator` measures it in place of `sluice serve`, so what the
 * transport alone costs stands next to what Sluice costs:
 *
 * - `net`: no WebSocket library; the upgrade is answered by hand and frames
 *   are unmasked straight off the socket (what Node and the kernel cost).
 * - `ws`: the `ws` server the coordinator uses, with its options; no parsing.
 * - `ws-json`: `ws` and a `JSON.parse` of every frame.
 *
 * All three build each lease reply with `JSON.stringify`, as the coordinator does, and answer a
 * `decide` frame by admitting each ask (`npm run bench -- remote`'s floor row: the round trip of
 * a remote decision with no Sluice on either side).
 * Not a server for anything else: it trusts the load generator's frames.
 */
type Mode = 'net' | 'ws' | 'ws-json'

const mode = process.argv[2] as Mode
if (mode !== 'net' && mode !== 'ws' && mode !== 'ws-json') {
  console.error('usage: transport-floor net|ws|ws-json')
  process.exit(2)
}

const welcome = '{"type":"welcome","v":1,"leaderEpoch":1}'
const leaseOf = (seq: number): string =>
  JSON.stringify({
    type: 'lease',
    seq,
    leases: [
      {
        resource: 'r1',
        capacity: 33.33333333333333,
        burst: 33.33333333333333,
        ttlMs: 10_000,
        refreshMs: 1000,
        safeCapacity: 10,
        seq,
      },
    ],
  })

/**
 * The answer to a `decide` frame (the remote decisions' floor, `npm run bench -- remote`): each
 * ask admitted, as the coordinator's answer says it. Parsed in every mode: the answer names each
 * ask's number.
 */
const decidedOf = (text: string): string =>
  JSON.stringify({
    type: 'decided',
    answers: (JSON.parse(text) as { asks: [number, string, number][] }).asks.map(([n]) => [
      n,
      1,
      9_999,
    ]),
  })

/** What to answer a frame with, if anything: the same rule for every mode. */
function replier(parse: boolean): (text: string) => string | undefined {
  let reports = 0
  let seq = 0
  return (text) => {
    if (text.startsWith('{"type":"decide"')) return decidedOf(text)
    const type = parse
      ? (JSON.parse(text) as { type: string }).type
      : text.startsWith('{"type":"hello"')
        ? 'hello'
        : text.startsWith('{"type":"demand"')
          ? 'demand'
          : 'other'
    if (type === 'hello') return welcome
    if (type === 'demand' && reports++ % 4 === 0) return leaseOf(++seq)
    return undefined
  }
}

const server = createServer((_req, res) => res.end(''))

if (mode === 'net') {
  const guid = '258EAFA5-E914-47DA-95CA-C5AB0DC85B11'
  const frame = (text: string): Buffer => {
    const payload = Buffer.from(text)
    const head =
      payload.length < 126
        ? Buffer.from([0x81, payload.length])
        : Buffer.from([0x81, 126, payload.length >> 8, payload.length & 255])
    return Buffer.concat([head, payload])
  }
  server.on('upgrade', (req, socket: Duplex) => {
    const accept = createHash('sha1')
      .update(`${req.headers['sec-websocket-key']}${guid}`)
      .digest('base64')
    socket.write(
      `HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: ${accept}\r\n\r\n`,
    )
    const reply = replier(false)
    socket.on('error', () => undefined)
    // The generator's frames are small and arrive whole: masked, with a 7- or 16-bit length.
    socket.on('data', (chunk: Buffer) => {
      let at = 0
      while (at + 6 <= chunk.length) {
        const opcode = chunk[at]! & 15
        let length = chunk[at + 1]! & 127
        let head = 2
        if (length === 126) {
          length = chunk.readUInt16BE(at + 2)
          head = 4
        }
        const mask = chunk.subarray(at + head, at + head + 4)
        const payload = Buffer.from(chunk.subarray(at + head + 4, at + head + 4 + length))
        for (let i = 0; i < payload.length; i++) payload[i]! ^= mask[i & 3]!
        at += head + 4 + length
        if (opcode !== 1) continue
        const out = reply(payload.toString('utf8'))
        if (out !== undefined) socket.write(frame(out))
      }
    })
  })
} else {
  // The coordinator's options (server/transport/gateway.ts): noServer, maxPayload twice 64 KiB.
  const wss = new WebSocketServer({ noServer: true, maxPayload: 128 * 1024 })
  server.on('upgrade', (req, socket, head) =>
    wss.handleUpgrade(req, socket, head, (ws) => {
      const reply = replier(mode === 'ws-json')
      ws.on('message', (data: Buffer) => {
        const out = reply(data.toString('utf8'))
        if (out !== undefined) ws.send(out)
      })
      ws.on('error', () => undefined)
    }),
  )
  // The coordinator pings every session on one heartbeat (15 s by default).
  setInterval(() => {
    for (const ws of wss.clients) ws.ping()
  }, 15_000).unref()
}

server.listen(0, '127.0.0.1', () => {
  const address = server.address()
  const port = typeof address === 'object' && address !== null ? address.port : 0
  console.log(`transport floor ${mode} (clients connect to ws://127.0.0.1:${port}/v1/connect)`)
})
