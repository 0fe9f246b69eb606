import { once } from 'node:events'
import { rmSync } from 'node:fs'
import WebSocket from 'ws'
import { afterAll, describe, expect, it } from 'vitest'
import { createClient } from '../../client/index.js'
import { ManualClock } from '../../shared/index.js'
import { makePki } from '../helpers/certs.js'
import { closedAfterEach, simpleConfig, startCoordinator } from '../helpers/coordinator.js'

// TLS on the coordinator's one port (HTTPS and WSS) and in the client, with a throwaway CA.

const pki = makePki()
const other = makePki('someone-else')
afterAll(() => {
  for (const p of [pki, other]) rmSync(p.dir, { recursive: true, force: true })
})
const { running } = closedAfterEach()

async function tlsCoordinator(clientCerts: 'none' | 'require' = 'none') {
  const clock = new ManualClock()
  const { server } = await startCoordinator(
    simpleConfig(
      {},
      {
        limits: { roundDebounceMs: 0 },
        tls: { certFile: pki.certFile, keyFile: pki.keyFile, caFile: pki.caFile, clientCerts },
      },
    ),
    clock,
  )
  running.push(server)
  return { server, clock }
}

/** Whether a raw WebSocket with these options completes its handshake. */
async function handshake(url: string, options: WebSocket.ClientOptions): Promise<boolean> {
  const ws = new WebSocket(url, options)
  const opened = await new Promise<boolean>((resolve) => {
    ws.on('open', () => resolve(true))
    ws.on('error', () => resolve(false))
    ws.on('close', () => resolve(false))
  })
  ws.terminate()
  return opened
}

describe('TLS', () => {
  it('serves wss:// and https://; a client trusting the CA gets its lease', async () => {
    const { server, clock } = await tlsCoordinator()
    expect(server.wsUrl).toMatch(/^wss:\/\//)
    expect(server.url).toMatch(/^https:\/\//)
    const client = createClient({ url: server.wsUrl, clock, tls: { ca: pki.ca } })
    running.push(client)
    const api = client.resource('api', { wants: 10 })
    await once(client, 'connect')
    for (let i = 0; i < 20 && api.mode !== 'leased'; i++) {
      clock.advance(50)
      await client.roundTrip()
    }
    expect(api.mode).toBe('leased')
  })

  it('refuses a plaintext client, and a client that does not trust the certificate', async () => {
    const { server } = await tlsCoordinator()
    const plain = server.wsUrl.replace(/^wss:/, 'ws:')
    expect(await handshake(plain, {})).toBe(false)
    expect(await handshake(server.wsUrl, {})).toBe(false) // the system CAs do not know ours
    expect(await handshake(server.wsUrl, { ca: other.ca })).toBe(false)
    expect(await handshake(server.wsUrl, { ca: pki.ca })).toBe(true)
  })

  it('requires a client certificate signed by the CA when clientCerts is require', async () => {
    const { server } = await tlsCoordinator('require')
    expect(await handshake(server.wsUrl, { ca: pki.ca })).toBe(false)
    expect(
      await handshake(server.wsUrl, { ca: pki.ca, cert: other.clientCert, key: other.clientKey }),
    ).toBe(false)
    expect(
      await handshake(server.wsUrl, { ca: pki.ca, cert: pki.clientCert, key: pki.clientKey }),
    ).toBe(true)
  })

  it('re-reads the certificate on reload, and refuses a reload that drops TLS', async () => {
    const { server } = await tlsCoordinator()
    const rotated = makePki('rotated')
    try {
      const next = simpleConfig(
        {},
        {
          adminToken: 'admin-token-1',
          tls: { certFile: rotated.certFile, keyFile: rotated.keyFile },
        },
      )
      await server.reload(next)
      expect(await handshake(server.wsUrl, { ca: rotated.ca })).toBe(true)
      expect(await handshake(server.wsUrl, { ca: pki.ca })).toBe(false)
      await expect(
        server.reload(simpleConfig({}, { adminToken: 'admin-token-1' })),
      ).rejects.toMatchObject({
        code: 'SLUICE_ERR_CONFIG_DOWNGRADE',
      })
    } finally {
      rmSync(rotated.dir, { recursive: true, force: true })
    }
  })

  it('refuses an http:// URL in the client, naming the option', () => {
    expect(() => createClient({ url: 'http://127.0.0.1:7070/v1/connect' })).toThrow(
      expect.objectContaining({ code: 'SLUICE_ERR_OPTION_INVALID' }),
    )
  })
})
