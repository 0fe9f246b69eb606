import { randomUUID } from 'node:crypto'
import { Etcd3 } from 'etcd3'
import fc from 'fast-check'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { EtcdLedger } from '../../../server/ha/index.js'
import {
  MemoryLedger,
  entryKey,
  type LedgerChange,
  type LedgerEntry,
} from '../../../server/ledger/index.js'
import { EtcdServer } from '../../helpers/etcd.js'

// The ledger on a real etcd: it must keep what the memory ledger keeps (the reference the file
// ledger is held to as well), and refuse a write from a replica that lost its election key.

let etcd: EtcdServer
let client: Etcd3
beforeAll(async () => {
  etcd = await EtcdServer.create()
  client = new Etcd3({ hosts: [etcd.clientUrl] })
})
afterAll(async () => {
  client?.close()
  await etcd?.destroy()
})

/** An election key of our own, as a leader holds one: what every write is fenced by. */
async function leaderKey(name: string): Promise<{ key: string; createRevision: string }> {
  const key = `election/${name}/${randomUUID()}`
  const put = await client.put(key).value('me').exec()
  return { key, createRevision: put.header.revision }
}

const entry = fc.record({
  clientKey: fc.constantFrom('a', 'b', 't\u0000c'),
  clientId: fc.constantFrom('a', 'b', 'c'),
  tenant: fc.constantFrom(undefined, 't'),
  instance: fc.constantFrom(undefined, 'inst-0001'),
  resource: fc.constantFrom('api', 'db/writes'),
  pinned: fc.boolean(),
  commitments: fc.array(
    fc.record({
      capacity: fc.integer({ min: 0, max: 1000 }),
      untilMs: fc.integer({ min: 0, max: 1e12 }),
      fallback: fc.integer({ min: 0, max: 1000 }),
      fallbackUntilMs: fc.integer({ min: 0, max: 1e12 }),
    }),
    { maxLength: 2 },
  ),
}) as fc.Arbitrary<LedgerEntry>
const change: fc.Arbitrary<LedgerChange> = fc.oneof(
  entry.map((put) => ({ put })),
  entry.map((e) => ({ remove: { clientKey: e.clientKey, resource: e.resource } })),
)
// JSON drops undefined fields: compare as the ledgers store them.
const byKey = (entries: readonly LedgerEntry[] | undefined) =>
  Object.fromEntries(
    (entries ?? []).map((e) => [entryKey(e.clientKey, e.resource), JSON.parse(JSON.stringify(e))]),
  )

describe('ledger on etcd', () => {
  it('keeps what the memory ledger keeps, write for write', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.array(fc.array(change, { minLength: 1, maxLength: 4 }), { maxLength: 25 }),
        async (writes) => {
          const name = `prop-${randomUUID()}`
          const fence = await leaderKey(name)
          const ledger = new EtcdLedger(client, name, () => fence)
          expect(await ledger.load()).toBeUndefined()
          const reference = new MemoryLedger()
          for (const w of writes) {
            reference.write(w)
            await ledger.write(w)
          }
          const loaded =
            writes.length === 0 ? [] : await new EtcdLedger(client, name, () => fence).load()
          expect(byKey(loaded)).toEqual(byKey(reference.entries()))
        },
      ),
      { numRuns: Math.max(10, Math.floor(fc.readConfigureGlobal().numRuns! / 20)) },
    )
  })

  it('refuses the write of a replica whose election key is gone (fencing), and writes nothing of it', async () => {
    const name = `fence-${randomUUID()}`
    const fence = await leaderKey(name)
    const ledger = new EtcdLedger(client, name, () => fence)
    const a: LedgerEntry = {
      clientKey: 'a',
      clientId: 'a',
      tenant: undefined,
      instance: undefined,
      resource: 'api',
      pinned: false,
      commitments: [],
    }
    await ledger.write([{ put: a }])
    // Its etcd lease lapsed, or another replica took over: the key is gone.
    await client.delete().key(fence.key).exec()
    await expect(ledger.write([{ put: { ...a, resource: 'db' } }])).rejects.toMatchObject({
      code: 'SLUICE_ERR_LEDGER_WRITE',
    })
    expect(byKey(await ledger.load())).toEqual(byKey([a]))
    // Not leading at all: nothing is even tried.
    await expect(
      new EtcdLedger(client, name, () => undefined).write([{ put: a }]),
    ).rejects.toMatchObject({
      code: 'SLUICE_ERR_LEDGER_WRITE',
    })
  })
})
