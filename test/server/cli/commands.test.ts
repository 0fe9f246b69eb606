import { EventEmitter, once } from 'node:events'
import { createServer, type AddressInfo } from 'node:net'
import { mkdtemp, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { dirname, join } from 'node:path'
import { afterEach, describe, expect, it } from 'vitest'
import { runCli } from '../../../server/cli/main.js'
import { simpleConfig, startCoordinator } from '../../helpers/coordinator.js'
import { TestClient } from '../../helpers/ws-client.js'

function io(signals?: EventEmitter) {
  const out = { stdout: '', stderr: '', writes: new EventEmitter() }
  return {
    out,
    io: {
      stdin: [] as string[],
      stdout: {
        write: (text: string) => {
          out.stdout += text
          out.writes.emit('write')
        },
      },
      stderr: { write: (text: string) => (out.stderr += text) },
      ...(signals === undefined ? {} : { signals }),
    },
  }
}

async function tempFile(name: string, text: string): Promise<string> {
  const file = join(await mkdtemp(join(tmpdir(), 'sluice-cli-')), name)
  await writeFile(file, text)
  return file
}

const cleanup: Array<() => Promise<unknown>> = []
afterEach(async () => {
  for (const c of cleanup.splice(0)) await c()
})

describe('sluice validate', () => {
  it('exits 0 with a summary for a valid file', async () => {
    const { io: cliIo, out } = io()
    expect(await runCli(['validate', 'examples/default.yaml'], cliIo)).toBe(0)
    expect(out.stdout).toContain('valid (7 resource template(s), 0 tenant(s)')
  })

  it('says what a valid file leaves open on stderr, and still exits 0: capacity 0, a tenant on every resource', async () => {
    const file = await tempFile(
      'open.yaml',
      [
        'resources:',
        '  - { match: api, kind: rate, capacity: 100 }',
        '  - { match: off, kind: rate, capacity: 0 }',
        '  - { match: apikey/*, keyed: true, kind: quota, capacity: 0, window: 1m }',
        'tenants:',
        '  acme: { token: acme-token-0123456789 }',
        '',
      ].join('\n'),
    )
    const { io: cliIo, out } = io()
    expect(await runCli(['validate', file], cliIo)).toBe(0)
    expect(out.stdout).toContain('valid (3 resource template(s), 1 tenant(s)')
    const warnings = out.stderr.trim().split('\n')
    expect(warnings).toEqual([
      expect.stringMatching(/^warning: tenant acme: tenant without a resources list/),
      'warning: resource off: capacity 0: every request for it is refused (a kill switch)',
      expect.stringMatching(/^warning: resource apikey\/\*: capacity 0: every key is refused/),
    ])
    // The default config leaves nothing open.
    const plain = io()
    expect(await runCli(['validate', 'examples/default.yaml'], plain.io)).toBe(0)
    expect(plain.out.stderr).toBe('')
  })

  it('exits 1 naming the field for an invalid file', async () => {
    const file = await tempFile(
      'bad.yaml',
      'resources:\n  - { match: x, kind: rate, capacity: -1 }\n',
    )
    const { io: cliIo, out } = io()
    expect(await runCli(['validate', file], cliIo)).toBe(1)
    expect(out.stderr).toContain('SLUICE_ERR_CONFIG_INVALID')
    expect(out.stderr).toContain('resources[0].capacity')
  })

  it('exits 1 when the file is missing, and 2 without an argument', async () => {
    expect(await runCli(['validate', '/nonexistent/sluice.yaml'], io().io)).toBe(1)
    expect(await runCli(['validate'], io().io)).toBe(2)
  })
})

describe('sluice status', () => {
  it('prints a table of resources from a running coordinator', async () => {
    const { server, clock } = await startCoordinator(simpleConfig())
    cleanup.push(() => server.close())
    const c = await TestClient.connect(server.wsUrl)
    cleanup.push(async () => c.ws.terminate())
    await c.hello('a')
    c.send({ type: 'demand', resources: [{ resource: 'api', wants: 120 }] })
    await c.flush()
    clock.advance(0)
    await c.nextLease('api')
    const { io: cliIo, out } = io()
    expect(await runCli(['status', '--url', server.url], cliIo)).toBe(0)
    const lines = out.stdout.trim().split('\n')
    expect(lines[0]).toMatch(
      /^RESOURCE\s+KIND\s+CAPACITY\s+COMMITTED\s+FREE\s+DEMAND\s+CLIENTS\s+LEARNING$/,
    )
    expect(lines[1]).toMatch(/^api\s+rate\s+300\s+120\s+180\s+120\s+1\s+no$/)
  })

  it('exits 1 with SLUICE_ERR_HTTP_UNREACHABLE when nothing answers, and says what to check', async () => {
    // A port nothing listens on (taken, then given back).
    const probe = createServer()
    await new Promise<void>((resolve) => probe.listen(0, '127.0.0.1', resolve))
    const port = (probe.address() as AddressInfo).port
    await new Promise((resolve) => probe.close(resolve))
    const { io: cliIo, out } = io()
    expect(await runCli(['status', '--url', `http://127.0.0.1:${port}`], cliIo)).toBe(1)
    expect(out.stderr).toContain('SLUICE_ERR_HTTP_UNREACHABLE')
    expect(out.stderr).toMatch(/ECONNREFUSED.*is the coordinator running/)
  })

  it('takes the URL the coordinator prints for clients, a bare host:port, and SLUICE_URL', async () => {
    const { server } = await startCoordinator(simpleConfig())
    cleanup.push(() => server.close())
    const hostPort = new URL(server.url).host
    for (const url of [server.wsUrl, hostPort]) {
      const { io: cliIo, out } = io()
      expect(await runCli(['status', '--url', url], cliIo), `${url}: ${out.stderr}`).toBe(0)
    }
    const before = process.env.SLUICE_URL
    process.env.SLUICE_URL = server.wsUrl
    try {
      const { io: cliIo, out } = io()
      expect(await runCli(['status'], cliIo), out.stderr).toBe(0)
    } finally {
      if (before === undefined) delete process.env.SLUICE_URL
      else process.env.SLUICE_URL = before
    }
  })
})

describe('sluice usage errors', () => {
  it('names an unknown option and the one meant', async () => {
    const { io: cliIo, out } = io()
    expect(await runCli(['status', '--tokn', 'x'], cliIo)).toBe(2)
    expect(out.stderr).toContain('unknown option --tokn (did you mean --token?)')
  })

  it('names an unknown command and the one meant, and prints the version', async () => {
    const { io: cliIo, out } = io()
    expect(await runCli(['stauts'], cliIo)).toBe(2)
    expect(out.stderr).toContain('did you mean status?')
    const version = io()
    expect(await runCli(['--version'], version.io)).toBe(0)
    expect(version.out.stdout).toMatch(/^sluice \d+\.\d+\.\d+/)
  })
})

describe('sluice <command> --help', () => {
  it.each(['serve', 'validate', 'status', 'allocate', 'simulate'])(
    'prints the usage of %s and exits 0',
    async (name) => {
      for (const flag of ['--help', '-h']) {
        const { io: cliIo, out } = io()
        expect(await runCli([name, flag], cliIo)).toBe(0)
        expect(out.stdout).toMatch(new RegExp(`^Usage: sluice ${name}`))
      }
    },
  )
})

describe('sluice status with protected reads', () => {
  it('says a token is needed on 401, and reads with --token', async () => {
    const { server } = await startCoordinator(simpleConfig({}, { readToken: 'read-token-123' }))
    cleanup.push(() => server.close())
    const denied = io()
    expect(await runCli(['status', '--url', server.url], denied.io)).toBe(1)
    expect(denied.out.stderr).toMatch(/--token|SLUICE_TOKEN/)
    const allowed = io()
    const argv = ['status', '--url', server.url, '--token', 'read-token-123']
    expect(await runCli(argv, allowed.io)).toBe(0)
    expect(allowed.out.stdout).toMatch(/^RESOURCE/)
  })
})

describe('sluice serve', () => {
  it('serves on the given port, reloads on SIGHUP and stops on SIGTERM', async () => {
    process.env.SLUICE_LOG_LEVEL = 'silent'
    const file = await tempFile(
      'sluice.yaml',
      'resources:\n  - { match: api, kind: rate, capacity: 300 }\n',
    )
    const signals = new EventEmitter()
    const { io: cliIo, out } = io(signals)
    const dataDir = join(dirname(file), 'data')
    const exit = runCli(['serve', '--config', file, '--port', '0', '--data-dir', dataDir], cliIo)
    // serve prints its URL once listening; wait for that output, not for time.
    let match = /listening on (http:\/\/\S+)/.exec(out.stdout)
    while (match === null) {
      await once(out.writes, 'write')
      match = /listening on (http:\/\/\S+)/.exec(out.stdout)
    }
    const url = match[1]!
    expect(await (await fetch(`${url}/healthz`)).json()).toEqual({ status: 'ok' })
    await writeFile(
      file,
      'resources:\n  - { match: api, kind: rate, capacity: 300 }\n  - { match: other, kind: rate, capacity: 5 }\n',
    )
    signals.emit('SIGHUP')
    while (!out.stdout.includes('config reloaded')) await once(out.writes, 'write')
    expect(out.stdout).toContain('config reloaded: 2 resource template(s), 0 tenant(s)')
    signals.emit('SIGTERM')
    expect(await exit).toBe(0)
    await expect(fetch(`${url}/healthz`)).rejects.toThrow()
  })

  it('says which port is taken, with SLUICE_ERR_SERVER_LISTEN, when another process holds it', async () => {
    process.env.SLUICE_LOG_LEVEL = 'silent'
    const { server } = await startCoordinator(simpleConfig())
    cleanup.push(() => server.close())
    const port = new URL(server.url).port
    const file = await tempFile(
      'sluice.yaml',
      'resources:\n  - { match: api, kind: rate, capacity: 300 }\n',
    )
    const { io: cliIo, out } = io(new EventEmitter())
    const args = ['serve', '--config', file, '--port', port, '--data-dir', 'none']
    expect(await runCli(args, cliIo)).toBe(1)
    expect(out.stderr).toContain('SLUICE_ERR_SERVER_LISTEN')
    expect(out.stderr).toContain(`:${port} is in use`)
  })

  it('refuses to start on a data directory it cannot use, with SLUICE_ERR_LEDGER_DIR', async () => {
    process.env.SLUICE_LOG_LEVEL = 'silent'
    const file = await tempFile(
      'sluice.yaml',
      'resources:\n  - { match: api, kind: rate, capacity: 1 }\n',
    )
    const { io: cliIo, out } = io(new EventEmitter())
    const args = ['serve', '--config', file, '--port', '0', '--data-dir', join(file, 'data')]
    expect(await runCli(args, cliIo)).toBe(1)
    expect(out.stderr).toContain('SLUICE_ERR_LEDGER_DIR')
  })

  it('exits 2 without --config', async () => {
    const { io: cliIo, out } = io()
    expect(await runCli(['serve'], cliIo)).toBe(2)
    expect(out.stderr).toContain('--config')
  })
})
