import { FileLedger } from '../../server/ledger/index.js'

/**
 * A process that writes a ledger until told to stop, for the full-disk
 * test: `node ledger-writer.js DIR WRITES` (run under a file-size limit or
 * on a small file system). It prints one JSON line: the writes that
 * resolved and the ones that failed, by index. Bounded: WRITES writes.
 */
const [dir, count] = [process.argv[2]!, Number(process.argv[3] ?? '100')]
const ledger = new FileLedger(dir)
await ledger.load()
const resolved: number[] = []
const failed: number[] = []
for (let i = 0; i < count; i++) {
  try {
    await ledger.write([
      {
        put: {
          // Few keys, many writes: the log grows, compactions come, space runs out mid-way.
          clientKey: `c${i % 7}`,
          clientId: `c${i % 7}`,
          tenant: undefined,
          instance: undefined,
          resource: `r${i}`,
          pinned: false,
          commitments: [{ capacity: i, untilMs: 1e12, fallback: 0, fallbackUntilMs: 1e12 }],
        },
      },
    ])
    resolved.push(i)
  } catch {
    failed.push(i)
  }
}
await ledger.close()
process.stdout.write(`${JSON.stringify({ resolved, failed })}\n`)
