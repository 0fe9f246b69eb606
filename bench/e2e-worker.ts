import { performance } from 'node:perf_hooks'
import { Redis } from 'ioredis'
import { RateLimiterRedis, RateLimiterRes } from 'rate-limiter-flexible'
import { createClient } from '../client/index.js'
import { TokenBucket } from '../shared/limiters/token-bucket.js'
import { systemClock } from '../shared/index.js'

// One of the end-to-end benchmark's processes: offers `demandPerSec` requests per second
// (open loop, in 5 ms steps) to one limiter for warmupMs + measureMs, then prints a JSON line.

interface WorkerConfig {
  mode: 'sluice' | 'redis' | 'static'
  id: number
  demandPerSec: number
  limitPerSec: number
  workers: number
  warmupMs: number
  measureMs: number
  url?: string
  redisSocket?: string
}

const cfg = JSON.parse(process.argv[2]!) as WorkerConfig
let decide: () => boolean | Promise<boolean>
let closeAll: () => void = () => undefined

if (cfg.mode === 'sluice') {
  const client = createClient({ url: cfg.url!, clientId: `worker-${cfg.id}` })
  const resource = client.resource('e2e')
  decide = () => resource.tryAcquire()
  closeAll = () => void client.close()
} else if (cfg.mode === 'redis') {
  const redis = new Redis({ path: cfg.redisSocket!, maxRetriesPerRequest: 1 })
  const limiter = new RateLimiterRedis({
    storeClient: redis,
    keyPrefix: 'e2e',
    points: cfg.limitPerSec,
    duration: 1,
  })
  decide = () =>
    limiter.consume('global').then(
      () => true,
      (rejection: unknown) => {
        if (rejection instanceof RateLimiterRes) return false
        throw rejection
      },
    )
  closeAll = () => redis.disconnect()
} else {
  const share = cfg.limitPerSec / cfg.workers
  const bucket = new TokenBucket(systemClock, share, share)
  decide = () => bucket.tryTake(1)
}

let attempted = 0
let admitted = 0
const latencies: number[] = []
let measuring = false
let issued = 0
const startMs = performance.now()

function record(ok: boolean, t0: number): void {
  if (!measuring) return
  attempted++
  if (ok) admitted++
  if (latencies.length < 200_000) latencies.push(performance.now() - t0)
}

const timer = setInterval(() => {
  const due = Math.floor(((performance.now() - startMs) * cfg.demandPerSec) / 1000)
  for (; issued < due; issued++) {
    const t0 = performance.now()
    const result = decide()
    if (typeof result === 'boolean') record(result, t0)
    else void result.then((ok) => record(ok, t0))
  }
}, 5)

setTimeout(() => {
  measuring = true
  const cpuBefore = process.cpuUsage()
  setTimeout(() => {
    measuring = false
    const cpu = process.cpuUsage(cpuBefore)
    clearInterval(timer)
    latencies.sort((a, b) => a - b)
    // Every 10th sample is enough for percentiles across workers.
    const sample = latencies.filter((_, i) => i % 10 === 0)
    process.stdout.write(
      JSON.stringify({
        id: cfg.id,
        attempted,
        admitted,
        cpuUs: cpu.user + cpu.system,
        latencyMs: sample,
      }) + '\n',
    )
    closeAll()
    setTimeout(() => process.exit(0), 100)
  }, cfg.measureMs)
}, cfg.warmupMs)
