import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterEach, beforeAll, describe, expect, it } from 'vitest'
import type { LeaseGrant, LeaseMessage, LeaseProof } from '../../../shared/index.js'
import { Replica, assertBuilt } from '../../helpers/replica.js'
import { waitFor } from '../../helpers/wait.js'
import { TestClient } from '../../helpers/ws-client.js'

// A hostile client replays an older, larger lease proof to a restarted (learning) coordinator.
// A real coordinator process (no ledger, so it learns after a restart), two raw protocol clients.

beforeAll(() => assertBuilt())
const cleanup: (() => Promise<unknown> | void)[] = []
afterEach(async () => {
  for (const c of cleanup.splice(0).reverse()) await c()
})

const capacity = 100

async function coordinator(configPath: string, port: number): Promise<Replica> {
  const replica = await Replica.spawn([
    '--config',
    configPath,
    '--port',
    String(port),
    '--data-dir',
    'none',
  ])
  cleanup.push(() => replica.kill())
  return replica
}

/** A raw client that asks for `wants`, acknowledges every lease, and keeps what it was sent. */
async function holder(
  url: string,
  id: string,
  wants: number,
  holdings?: { capacity: number; proof: LeaseProof },
): Promise<{ client: TestClient; leases: LeaseGrant[] }> {
  const client = await TestClient.connect(url)
  cleanup.push(() => void client.close())
  const leases: LeaseGrant[] = []
  client.ws.on('message', (data: Buffer) => {
    const msg = JSON.parse(data.toString()) as LeaseMessage
    if (msg.type !== 'lease') return
    leases.push(...msg.leases)
    client.send({ type: 'ack', seq: msg.seq })
  })
  await client.hello(id, {
    instance: `${id}-instance-1`,
    ...(holdings === undefined ? {} : { holdings: [{ resource: 'api', ...holdings }] }),
  })
  client.send({ type: 'demand', resources: [{ resource: 'api', wants }] })
  return { client, leases }
}

describe('a replayed lease proof', () => {
  it('cannot push out a newer proof: the newest claims count first after a restart', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'sluice-replay-'))
    cleanup.push(() => rmSync(dir, { recursive: true, force: true }))
    const configPath = join(dir, 'sluice.json')
    writeFileSync(
      configPath,
      JSON.stringify({
        server: {
          host: '127.0.0.1',
          holdingsKey: { current: 'a holdings key of at least thirty-two characters' },
          limits: { roundDebounceMs: 0 },
        },
        resources: [
          {
            match: 'api',
            kind: 'rate',
            capacity,
            leaseTtlMs: 8000,
            refreshMs: 100,
            graceMs: 200,
            safeHoldMs: 500,
            learningMs: 1500,
            unsafeLearning: true,
            surplus: 'hold',
            demand: { window: 1 },
          },
        ],
      }),
    )
    let server = await coordinator(configPath, 0)
    const port = Number(new URL(server.url).port)
    const url = server.wsUrl
    // The first start learns too (no ledger): wait it out, then A takes all.
    const a = await holder(url, 'a', capacity)
    const old = await waitFor('a to hold all of it', () =>
      a.leases.find((l) => l.capacity === capacity && l.proof !== undefined),
    )
    // B comes: A is cut to 50 (and acknowledges), B gets 50.
    const b = await holder(url, 'b', capacity)
    const bLease = await waitFor('b to hold half', () =>
      b.leases.find((l) => l.capacity === capacity / 2 && l.proof !== undefined),
    )
    await waitFor('a cut to half', () => a.leases.at(-1)?.capacity === capacity / 2 || undefined)

    // The coordinator dies and comes back, learning. A presents its old proof of 100, first.
    await a.client.close()
    await b.client.close()
    await server.kill('SIGKILL')
    server = await coordinator(configPath, port)
    const replay = await holder(server.wsUrl, 'a', capacity, {
      capacity: old.capacity,
      proof: old.proof!,
    })
    await waitFor('a confirmed', () => replay.leases.at(-1))
    const honest = await holder(server.wsUrl, 'b', capacity, {
      capacity: bLease.capacity,
      proof: bLease.proof!,
    })
    await waitFor('b confirmed', () => honest.leases.at(-1))
    await honest.client.flush()
    await replay.client.flush()
    // B's newer proof counts in full; A's older one only in what is left beside it.
    expect(honest.leases.at(-1)?.capacity).toBe(capacity / 2)
    await waitFor('a cut back', () => replay.leases.at(-1)?.capacity === capacity / 2 || undefined)
  })
})
