import { CompiledConfig, parseConfig, type ResourceSettings } from '../server/config/index.js'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { FileLedger } from '../server/ledger/index.js'
import { Pool, type LeaseBatch } from '../server/pool/index.js'

/**
 * Run with `node --expose-gc`: the coordinator's pool with one keyed family,
 * two holders and `hotKeys` keys leased one by one to both (as the
 * keys-scale benchmark drives it), its changes taken for a ledger each
 * round. Prints the heap it holds per hot key per holding process, after a
 * full collection: the pool's entries, the keys' settings (cached, as the
 * coordinator caches them) and their demand histories; and apart, what the
 * file ledger (a real one, in a temporary directory, written each round)
 * keeps in memory of the same commitments.
 */
async function main(dir: string): Promise<void> {
  const gc = (globalThis as { gc?: () => void }).gc
  if (gc === undefined) throw new Error('run with node --expose-gc')
  const hotKeys = Number(process.argv[2] ?? 10_000)
  const config = new CompiledConfig(
    parseConfig(
      {
        resources: [
          { match: 'key/*', keyed: true, kind: 'rate', capacity: 20, maxHotKeys: 2 * hotKeys },
        ],
      },
      'keys-memory',
    ),
  )
  const cache = new Map<string, ResourceSettings | undefined>()
  const lookup = (id: string): ResourceSettings | undefined => {
    if (!cache.has(id)) cache.set(id, config.settingsFor(id))
    return cache.get(id)
  }
  const pool = new Pool(0, lookup, { learn: false, track: true })
  const clients = [
    { key: 'a', wants: 16 },
    { key: 'b', wants: 6 },
  ]
  let nowMs = 0
  const ack = (batches: readonly LeaseBatch[]): void => {
    for (const b of batches) pool.acknowledge(b.clientKey, b.seq, undefined, nowMs)
  }
  let ledger: FileLedger | undefined = new FileLedger(dir)
  await ledger.load()
  const round = async (): Promise<void> => {
    ack(pool.roundMany(pool.familyIds('key/*'), nowMs))
    const changes = pool.takeChanges((ms) => ms, {
      writtenMs: nowMs,
      writtenMono: nowMs,
      epoch: 'e',
    })
    await ledger!.write(changes)
  }
  for (const c of clients) {
    pool.connect(c.key, c.key, undefined, undefined, nowMs)
    ack(pool.reportDemand(c.key, [{ resource: 'key/*', wants: 100 }], nowMs).batches)
  }
  for (let i = 0; i < 5; i++, nowMs += 1000) await round()
  gc()
  const before = process.memoryUsage().heapUsed
  for (let r = 0; r < 5; r++, nowMs += 1000) {
    for (const c of clients) {
      const reports = [{ resource: 'key/*', wants: 100 }]
      for (let i = 0; i < hotKeys; i++) reports.push({ resource: `key/h${i}`, wants: c.wants })
      ack(pool.reportDemand(c.key, reports, nowMs).batches)
    }
    await round()
  }
  gc()
  const after = process.memoryUsage().heapUsed
  const holdings = pool.hotKeyCount('key/*') * clients.length
  await ledger.close()
  ledger = undefined
  gc()
  const withoutLedger = process.memoryUsage().heapUsed
  console.log(
    JSON.stringify({
      hotKeys: pool.hotKeyCount('key/*'),
      bytesPerHotKeyPerHolder: (withoutLedger - before) / holdings,
      ledgerBytesPerHotKeyPerHolder: (after - withoutLedger) / holdings,
    }),
  )
}

const dir = mkdtempSync(join(tmpdir(), 'sluice-keys-memory-'))
await main(dir).finally(() => rmSync(dir, { recursive: true, force: true }))
