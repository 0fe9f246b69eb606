import { createClient } from '../client/index.js'
import { systemClock } from '../shared/index.js'

/** One gateway process of `npm run bench -- keys-scale`. */
export interface ScaleWorkerSpec {
  readonly url: string
  readonly clientId: string
  readonly prefix: string
  /** Connected, asking nothing (the baseline). */
  readonly idleMs: number
  /** Then new keys only, each asked for once: cold keys. */
  readonly coldMs: number
  /** Then new keys and the hot keys together. */
  readonly hotMs: number
  readonly tickMs: number
  /** New distinct keys a second (this process's own; no other process asks for them). */
  readonly coldPerSec: number
  /** Keys h0 … h(n−1), asked for by every process. */
  readonly hotKeys: number
  /** What this process asks of each hot key a second. */
  readonly hotPerKeyPerSec: number
  readonly maxKeys: number
  readonly maxKeysPerReport: number
}

const gc = (globalThis as { gc?: () => void }).gc

/** Heap in use after a full collection (run with --expose-gc), bytes. */
function heapUsed(): number {
  gc?.()
  return process.memoryUsage().heapUsed
}

/**
 * Asks for keys of a family through `tryAcquire` every tick: nothing, then
 * cold keys only, then cold and hot keys. Logs one JSON object a line on
 * stdout: each second `{ t, phase, decisions, hotAsked, hotAdmitted }`; after
 * the cold phase `{ heap: { before, after, keys } }` (the heap with no key
 * tracked and with `keys` tracked); at the end `{ hotLeased }`, the hot keys
 * leased one by one. Stops by itself.
 */
async function main(): Promise<void> {
  const spec = JSON.parse(process.argv[2] ?? '{}') as ScaleWorkerSpec
  const say = (o: object): boolean => process.stdout.write(`${JSON.stringify(o)}\n`)
  const client = createClient({ url: spec.url, clientId: spec.clientId })
  client.on('error', (e) => say({ error: e.code }))
  const family = client.keyed(spec.prefix, {
    maxKeys: spec.maxKeys,
    maxKeysPerReport: spec.maxKeysPerReport,
  })
  await family.ready({ timeoutMs: 10_000 })
  const hot = Array.from({ length: spec.hotKeys }, (_, i) => `h${i}`)
  const before = heapUsed()
  const startMs = systemClock.now()
  const coldEndMs = startMs + spec.idleMs + spec.coldMs
  const endMs = coldEndMs + spec.hotMs
  let cold = 0
  let coldOwed = 0
  let hotOwed = 0
  let second = { decisions: 0, hotAsked: 0, hotAdmitted: 0 }
  let secondStartMs = startMs
  let lastMs = startMs
  let heapSaid = false
  await new Promise<void>((resolve) => {
    const timer = systemClock.setInterval(() => {
      const nowMs = systemClock.now()
      const dtSec = (nowMs - lastMs) / 1000
      lastMs = nowMs
      const phase = nowMs < startMs + spec.idleMs ? 'idle' : nowMs < coldEndMs ? 'cold' : 'hot'
      if (phase !== 'idle') {
        for (coldOwed += spec.coldPerSec * dtSec; coldOwed >= 1; coldOwed--) {
          family.tryAcquire(`c-${spec.clientId}-${cold++}`)
          second.decisions++
        }
      }
      if (phase === 'hot') {
        if (!heapSaid) {
          heapSaid = true
          say({ heap: { before, after: heapUsed(), keys: family.size } })
        }
        hotOwed += spec.hotPerKeyPerSec * dtSec
        for (; hotOwed >= 1; hotOwed--)
          for (const key of hot) {
            if (family.tryAcquire(key)) second.hotAdmitted++
            second.hotAsked++
            second.decisions++
          }
      }
      if (nowMs - secondStartMs >= 1000) {
        say({ t: Math.round(nowMs - startMs), phase, ...second })
        second = { decisions: 0, hotAsked: 0, hotAdmitted: 0 }
        secondStartMs = nowMs
      }
      if (nowMs >= endMs) {
        timer.cancel()
        resolve()
      }
    }, spec.tickMs)
  })
  say({ hotLeased: hot.filter((k) => family.leaseOf(k).source === 'key').length })
  await client.close()
}

await main()
process.exit(0)
