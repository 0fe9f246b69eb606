import { mkdtempSync, readFileSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterEach, describe, expect, it } from 'vitest'
import type { KeyedFamily } from '../../../client/index.js'
import type { RemoteAnswer } from '../../../client/remote.js'
import type { ConfigInput } from '../../../server/config/index.js'
import type { RunningCoordinator } from '../../../server/index.js'
import { parseLedger } from '../../../server/ledger/file-format.js'
import { parseReserveShardId } from '../../../server/pool/central-spend.js'
import { ManualClock } from '../../../shared/index.js'
import { embeddedLedger } from '../../helpers/embedded-ledger.js'

// A keyed quota decided at the coordinator (remote decisions), with the embedded ledger: what
// the coordinator's own part admits of a key is in the ledger before its answer leaves
// (server/coordinator/spend-reserve.ts), so a coordinator restarted from it hands the dead
// part's share on less what it reserved (server/pool/central-spend.ts) instead of counting it
// spent to the window's end.

const closers: Array<() => Promise<unknown>> = []
afterEach(async () => {
  for (const c of closers.splice(0).reverse()) await c()
})

const clock = new ManualClock()
const budget = 30
const config: ConfigInput = {
  server: { limits: { roundDebounceMs: 0 } },
  resources: [
    {
      match: 'q/*',
      keyed: true,
      kind: 'quota',
      capacity: budget,
      window: '1h',
      refreshMs: 100,
      leaseTtlMs: 1000,
      graceMs: 200,
      learningMs: 0,
      unsafeLearning: true,
      // One default holder: the other gateways hold nothing and ask the coordinator.
      maxDefaultHolders: 1,
    },
  ],
}

const ledger = embeddedLedger(clock, closers)
const { step } = ledger
const start = (dataDir: string, port = 0): Promise<RunningCoordinator> =>
  ledger.start(config, dataDir, port)
const gateway = ledger.client

/**
 * What the ledger file holds reserved for the coordinator's part of `key`, in any window (in
 * the shards of its reservations, entries of their own: central-spend.ts).
 */
function reservedInLedger(dataDir: string, key: string): number {
  const { entries } = parseLedger(readFileSync(join(dataDir, 'ledger.log'), 'utf8'))
  let units = 0
  for (const e of entries.values())
    if (e.clientId === 'sluice-central' && parseReserveShardId(e.resource)?.familyId === 'q/*')
      for (const w of e.reserved ?? [])
        for (const [k, n] of w.keys) if (k === key) units = Math.max(units, n)
  return units
}

describe("a keyed quota's remote decisions through a coordinator restart", () => {
  it('writes what the coordinator admits before answering, and hands the dead part’s share on less that', async () => {
    const dataDir = mkdtempSync(join(tmpdir(), 'sluice-data-'))
    closers.push(async () => rmSync(dataDir, { recursive: true, force: true }))
    let server = await start(dataDir)
    const port = server.port
    const clients = Array.from({ length: 8 }, (_, i) => gateway(server.wsUrl, `g${i}`))
    const families: KeyedFamily[] = clients.map((c) => c.keyed('q'))
    for (let i = 0; i < 20; i++) await step(server, clients, 50)
    const thin = families.filter((f) => (f.lease?.capacity ?? 0) === 0)
    expect(thin.length).toBeGreaterThan(4)

    // Remote decisions of one key, two a second: each admitted answer finds its unit in the
    // ledger already. (What is reserved ahead of a key's answers follows its pace: a second of
    // it, spent-to-be that a restart does not hand on.)
    let admitted = 0
    let remote = 0
    for (let i = 0; i < 12; i++) {
      const decided = thin[i % thin.length]!.decide('customer')
      const pending = Promise.resolve(decided).then((a: RemoteAnswer | boolean) => {
        const yes = a === true || (typeof a !== 'boolean' && a.admitted)
        if (yes) admitted++
        if (typeof a !== 'boolean' && a.admitted) {
          remote++
          expect(reservedInLedger(dataDir, 'customer')).toBeGreaterThanOrEqual(remote)
        }
      })
      await step(server, clients, 50)
      await pending
      for (let j = 0; j < 9; j++) await step(server, clients, 50)
    }
    expect(remote).toBeGreaterThan(3)
    const before = admitted

    // The coordinator dies (nothing of its part is released) and comes back on its ledger.
    await server.close()
    server = await start(dataDir, port)
    for (let i = 0; i < 40 && clients.some((c) => !c.connected); i++)
      await step(server, clients, 50)
    for (let i = 0; i < 10; i++) await step(server, clients, 50)

    // The rest of the key's budget is admitted (the dead part's share handed on), never more.
    for (let i = 0; i < 60; i++) {
      const a = await Promise.resolve(thin[i % thin.length]!.decide('customer')).then(
        (x: RemoteAnswer | boolean) => x,
        () => false,
      )
      if (a === true || (typeof a !== 'boolean' && a.admitted)) admitted++
      await step(server, clients, 50)
    }
    expect(admitted).toBeLessThanOrEqual(budget)
    expect(admitted - before).toBeGreaterThanOrEqual(budget - before - 3)
  })
})
