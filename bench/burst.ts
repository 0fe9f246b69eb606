import { mkdtemp, rm, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { createClient, type KeyedFamily } from '../client/index.js'
import { CoordinatorProcess, freePort, sleep } from './faults/harness.js'
import { hostMs } from './faults/host-time.js'

/**
 * A customer's burst at one gateway (#41): "100 per minute" per API key, three gateways (clients
 * in this process, as a gateway's `decide` and the HTTP edge ask), a real coordinator (`sluice
 * serve`, its file ledger) on loopback. After a warm-up of other customers' traffic at every
 * gateway, each of `customers` new customers sends `requests` checks of its key at once to one
 * gateway (a client that keeps its connection to one gateway), the gateways taken in turn. One
 * central token bucket per key, full at its first request, admits `min(requests, burst)` of
 * them at once. Each row: what Sluice admitted, and when the last answer came (host monotonic
 * time from the burst).
 */
export interface BurstRow {
  readonly customer: number
  readonly gateway: number
  readonly admitted: number
  readonly central: number
  readonly lastAnswerMs: number
}

export async function benchBurst(customers = 6, requests = 105): Promise<BurstRow[]> {
  const dir = await mkdtemp(join(tmpdir(), 'sluice-burst-'))
  const path = join(dir, 'sluice.json')
  const burst = 100
  await writeFile(
    path,
    JSON.stringify({
      server: { host: '127.0.0.1' },
      resources: [{ match: 'apikey/*', keyed: true, kind: 'rate', capacity: burst, per: '1m' }],
    }),
  )
  const coordinator = new CoordinatorProcess(path, await freePort())
  await coordinator.start()
  const url = `ws://127.0.0.1:${coordinator.port}/v1/connect`
  const clients = [0, 1, 2].map((i) => createClient({ url, clientId: `gw-${i}` }))
  const rows: BurstRow[] = []
  try {
    const families: KeyedFamily[] = clients.map((c) => c.keyed('apikey'))
    await Promise.all(families.map((f) => f.ready({ timeoutMs: 10_000 })))
    // Other customers at every gateway for 5 s, checked as the HTTP edge checks (bounded: it
    // stops by itself).
    const warmUntil = hostMs() + 5000
    for (let n = 0; hostMs() < warmUntil; n++) {
      for (const f of families) void f.decide(`other-${n % 20}`)
      await sleep(20)
    }
    for (let c = 0; c < customers; c++) {
      const gateway = c % families.length
      const family = families[gateway]!
      const startMs = hostMs()
      let lastAnswerMs = 0
      const answers = await Promise.all(
        Array.from({ length: requests }, async () => {
          const decided = family.decide(`customer-${c}`)
          if (typeof decided === 'boolean') return decided
          const answer = await decided
          lastAnswerMs = Math.max(lastAnswerMs, hostMs() - startMs)
          return answer.admitted
        }),
      )
      rows.push({
        customer: c,
        gateway,
        admitted: answers.filter((a) => a).length,
        central: Math.min(requests, burst),
        lastAnswerMs,
      })
      await sleep(1500)
    }
  } finally {
    for (const c of clients) await c.close()
    await coordinator.stop()
    await rm(dir, { recursive: true, force: true })
  }
  return rows
}
