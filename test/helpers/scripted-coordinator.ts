import { WebSocketServer, type WebSocket } from 'ws'

/**
 * A scripted coordinator on 127.0.0.1 (port 0), for what a real one does only by bad luck (a
 * lease late on purpose, a throttled client's reports counted one by one): it answers each
 * hello with a welcome (client id `clientId`, no learning, a 60 s heartbeat), then hands every
 * message, the hello included, to `onMessage`.
 */
export async function scriptedCoordinator(
  onMessage: (ws: WebSocket, msg: { type: string }) => void,
  clientId = 'x',
): Promise<{ server: WebSocketServer; port: number }> {
  const server = new WebSocketServer({ host: '127.0.0.1', port: 0 })
  await new Promise((resolve) => server.once('listening', resolve))
  server.on('connection', (ws) => {
    ws.on('message', (data: Buffer) => {
      const msg = JSON.parse(data.toString()) as { type: string }
      if (msg.type === 'hello')
        ws.send(
          JSON.stringify({ type: 'welcome', v: 1, clientId, learningMs: 0, heartbeatMs: 60000 }),
        )
      onMessage(ws, msg)
    })
  })
  return { server, port: (server.address() as { port: number }).port }
}
