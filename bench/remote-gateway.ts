import { createClient } from '../client/index.js'
import { sleep } from './faults/harness.js'
import { hostMs } from './faults/host-time.js'

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
const latencies: number[] = []
let asked = 0
let answered = 0
let admitted = 0
const tickMs = 2
const perTick = (perSec * tickMs) / 1000
let owed = 0
const untilMs = hostMs() + measureMs
while (hostMs() < untilMs) {
  owed += perTick
  const n = Math.floor(owed)
  owed -= n
  for (let i = 0; i < n; i++) {
    const at = hostMs()
    asked++
    const d = family.decide(nextKey())
    if (typeof d === 'boolean') {
      answered++
      if (d) admitted++
      latencies.push(0)
      continue
    }
    void d.then((a) => {
      answered++
      if (a.admitted) admitted++
      latencies.push(hostMs() - at)
    })
  }
  await sleep(tickMs)
}
await sleep(200)
process.stdout.write(`${JSON.stringify({ asked, answered, admitted, latencies })}\n`)
await client.close().catch(() => undefined)
process.exit(0)
