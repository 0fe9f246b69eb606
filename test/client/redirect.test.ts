import { once } from 'node:events'
import { rmSync } from 'node:fs'
import { WebSocketServer } from 'ws'
import { afterAll, describe, expect, it } from 'vitest'
import { createClient, type SluiceError } from '../../client/index.js'
import { redirectRefusal } from '../../client/redirect.js'
import { createCoordinator } from '../../server/index.js'
import { systemClock } from '../../shared/index.js'
import { makePki } from '../helpers/certs.js'
import { closedAfterEach, silentLogger, simpleConfig } from '../helpers/coordinator.js'
import { ManualElection } from '../helpers/manual-election.js'

// A redirect is a coordinator telling a client where to go: it must not send a wss:// client,
// and its tenant token, to ws:// nor to a host the client was not given.

const pki = makePki()
afterAll(() => rmSync(pki.dir, { recursive: true, force: true }))
const { running } = closedAfterEach()

describe('redirects', () => {
  it('never change the scheme nor leave the configured hosts unless allowed', () => {
    const hosts = new Set(['a.example', 'b.example'])
    const from = 'wss://a.example:7070/v1/connect'
    expect(redirectRefusal(from, 'wss://b.example:7071/v1/connect', hosts)).toBeUndefined()
    expect(redirectRefusal(from, 'ws://b.example:7071/v1/connect', hosts)).toMatch(/scheme/)
    expect(redirectRefusal(from, 'wss://evil.example/v1/connect', hosts)).toMatch(/redirectHosts/)
    expect(redirectRefusal(from, 'wss://evil.example/v1/connect', 'any')).toBeUndefined()
    expect(
      redirectRefusal('ws://a.example/v1/connect', 'wss://a.example/v1/connect', hosts),
    ).toMatch(/scheme/)
  })

  it('from a wss:// follower to a ws:// leader is refused: the token never goes out in clear', async () => {
    // Where the downgraded redirect points: a plain listener that records who comes.
    const plain = new WebSocketServer({ host: '127.0.0.1', port: 0 })
    running.push({ close: () => new Promise<void>((resolve) => plain.close(() => resolve())) })
    await once(plain, 'listening')
    const seen: (string | undefined)[] = []
    plain.on('connection', (_ws, req) => seen.push(req.headers.authorization))
    const plainUrl = `ws://127.0.0.1:${(plain.address() as { port: number }).port}/v1/connect`

    let election: ManualElection | undefined
    const follower = await createCoordinator({
      config: simpleConfig(
        {},
        { tls: { certFile: pki.certFile, keyFile: pki.keyFile, caFile: pki.caFile } },
      ),
      host: '127.0.0.1',
      port: 0,
      logger: silentLogger,
      election: (url) => (election = new ManualElection(url)),
    })
    running.push(follower)
    election!.announce(plainUrl)

    const client = createClient({
      url: follower.wsUrl,
      tls: { ca: pki.ca },
      token: 'a-tenant-token-in-clear',
      clock: systemClock,
      backoffBaseMs: 10,
      backoffCapMs: 20,
    })
    running.push(client)
    const [error] = (await once(client, 'error')) as [SluiceError]
    expect(error.code).toBe('SLUICE_ERR_CLIENT_REDIRECT')
    expect(error.message).toMatch(/scheme/)
    // Some reconnects later, still nobody came to the plain listener.
    await client.close()
    expect(seen).toEqual([])
  })

  it('is refused by a TLS coordinator asked to advertise ws://', async () => {
    await expect(
      createCoordinator({
        config: simpleConfig(
          {},
          { tls: { certFile: pki.certFile, keyFile: pki.keyFile, caFile: pki.caFile } },
        ),
        host: '127.0.0.1',
        port: 0,
        logger: silentLogger,
        advertise: 'ws://127.0.0.1:1/v1/connect',
        election: (url) => new ManualElection(url),
      }),
    ).rejects.toMatchObject({
      code: 'SLUICE_ERR_CONFIG_INVALID',
      message: expect.stringMatching(/wss:/),
    })
  })
})
