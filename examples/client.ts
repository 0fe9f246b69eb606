/**
 * A client process sharing `payments-api` with others: start a coordinator
 * (`npm start`), then run this in two or three terminals
 * (`npm run example:client`) and watch the leases
 * settle at fair shares in `npx sluice status`.
 */
import { createClient } from '../client/index.js'
import { systemClock } from '../shared/index.js'

const url = process.env.SLUICE_URL ?? 'ws://127.0.0.1:7070/v1/connect'
const wantsPerSec = Number(process.env.WANTS ?? 600)
const runForMs = Number(process.env.RUN_MS ?? 10_000)

const client = createClient({ url })
const payments = client.resource('payments-api')
payments.on('lease', (lease: { capacity: number }) =>
  console.log(`lease: ${lease.capacity.toFixed(1)} req/s`),
)
payments.on('mode', (mode: string) => console.log(`mode: ${mode}`))

let admitted = 0
let refused = 0
// Offer `wantsPerSec` requests per second, in 10 ms ticks; a bounded loop that stops by itself.
const tick = systemClock.setInterval(() => {
  for (let i = 0; i < wantsPerSec / 100; i++) {
    if (payments.tryAcquire()) admitted++
    else refused++
  }
}, 10)
const report = systemClock.setInterval(() => {
  console.log(
    `admitted ${admitted}/s, refused ${refused}/s (lease ${payments.capacity.toFixed(1)}/s, ${payments.mode})`,
  )
  admitted = 0
  refused = 0
}, 1000)

systemClock.setTimeout(() => {
  tick.cancel()
  report.cancel()
  void client.close()
}, runForMs)
