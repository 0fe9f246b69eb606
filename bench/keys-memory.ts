import { CompiledConfig, parseConfig, type ResourceSettings } from '../server/config/index.js'
import { mkdtempSync, readFileSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { writeHeapSnapshot } from 'node:v8'
import { FileLedger } from '../server/ledger/index.js'
import { Pool, type LeaseBatch } from '../server/pool/index.js'

/**
 * Run with `node --expose-gc`: the coordinator's pool with one keyed family,
 * two holders and `hotKeys` keys leased one by one to both (as the
 * keys-scale benchmark drives it), its changes taken for a ledger each
 * round. Prints the heap it holds per hot key per holding process, after a
 * full collection: the pool's entries, the keys' settings (cached, as the
 * coordinator caches them) and their demand histories; and apart, what the
 * file ledger (a real one, in a temporary directory, written each round,
 * its snapshots taken from the pool as the coordinator wires it) keeps in
 * memory of the same commitments.
 *
 * Two measures of the pool's part: the heap in use (`heapUsed`, which also
 * counts the free space left between live objects in pages the collector
 * did not compact) and the live objects alone (a heap snapshot's sizes).
 * The pool's clock is fractional, as a coordinator's monotonic clock is: a
 * time in whole milliseconds would be a small integer, unboxed, and flatter
 * the pool by ~100 bytes.
 */
/** The bytes of every live object, from a heap snapshot (taken after a full collection). */
function liveHeapBytes(dir: string): number {
  const file = writeHeapSnapshot(join(dir, `heap-${process.hrtime.bigint()}.heapsnapshot`))
  const snapshot = JSON.parse(readFileSync(file, 'utf8')) as {
    snapshot: { meta: { node_fields: string[] } }
    nodes: number[]
  }
  rmSync(file)
  const fields = snapshot.snapshot.meta.node_fields
  const size = fields.indexOf('self_size')
  let bytes = 0
  for (let i = size; i < snapshot.nodes.length; i += fields.length) bytes += snapshot.nodes[i]!
  return bytes
}

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
  // A coordinator up for a day, on a monotonic clock with fractions of a millisecond.
  let nowMs = 86_400_000.125
  const ack = (batches: readonly LeaseBatch[]): void => {
    for (const b of batches) pool.acknowledge(b.clientKey, b.seq, undefined, nowMs)
  }
  let ledger: FileLedger | undefined = new FileLedger(dir)
  await ledger.load()
  // As the coordinator wires it: snapshots come from the pool (SLUICE_LEDGER_COPY=1: the
  // ledger keeps a copy of every entry instead, as it did before).
  if (process.env.SLUICE_LEDGER_COPY !== '1')
    ledger.snapshotFrom(() =>
      pool.ledgerEntries((ms) => ms, { writtenMs: nowMs, writtenMono: nowMs, epoch: 'e' }),
    )
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
  const liveBefore = liveHeapBytes(dir)
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
  const liveAfter = liveHeapBytes(dir)
  console.log(
    JSON.stringify({
      hotKeys: pool.hotKeyCount('key/*'),
      bytesPerHotKeyPerHolder: Math.round((withoutLedger - before) / holdings),
      liveBytesPerHotKeyPerHolder: Math.round((liveAfter - liveBefore) / holdings),
      ledgerBytesPerHotKeyPerHolder: Math.round((after - withoutLedger) / holdings),
    }),
  )
}

const dir = mkdtempSync(join(tmpdir(), 'sluice-keys-memory-'))
await main(dir).finally(() => rmSync(dir, { recursive: true, force: true }))
