import { createClient } from '../client/index.js'
import { sleep } from './faults/harness.js'
import { hostMs } from './faults/host-time.js'
import { pacedAsks } from './remote.js'

/**
 * One gateway of `npm run bench -- remote`'s "one gateway per process" row (bench/remote.ts,
 * `benchRemoteApart`): a client in a process of its own, as a gateway fleet runs them, checking
 * a crowded keyed family through `decide`. Argv: the coordinator's port, this gateway's index,
 * the keys drawn from, its asks a second, the warm-up and measured milliseconds. Prints one
 * JSON line: its counts and every ask's latency (host monotonic ms), then exits.
 */
const [port, index, keys, perSec, warmMs, measureMs] = process.argv.slice(2).map(Number) as [
  number,
  number,
  number,
  number,
  number,
  number,
]
const client = createClient({
  url: `ws://127.0.0.1:${port}/v1/connect`,
  clientId: `apart-${index}`,
})
client.on('error', () => undefined)
const family = client.keyed('key')
await family.ready({ timeoutMs: 10_000 })
let seed = 12345 + index * 7919
const nextKey = (): string => {
  seed = (seed * 1103515245 + 12345) % 2147483648
  return `k${seed % keys}`
}
// Warm-up, as in-process: it says it decides remotely; the family turns crowded at a round.
const warmUntil = hostMs() + warmMs
while (hostMs() < warmUntil) {
  for (let i = 0; i < 5; i++) void family.decide(nextKey())
  await sleep(5)
}
const run = await pacedAsks([(key) => family.decide(key)], perSec, measureMs, nextKey)
process.stdout.write(
  `${JSON.stringify({ asked: run.asked, answered: run.answered, admitted: run.admitted, latencies: run.latencies })}\n`,
)
await client.close().catch(() => undefined)
process.exit(0)
