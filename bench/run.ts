import { cpus } from 'node:os'
import { benchAllocation } from './allocation.js'
import { benchBurst } from './burst.js'
import { benchClient } from './client.js'
import { benchCoordinatorRows } from './coordinator.js'
import { benchE2e, demands, limitPerSec } from './e2e.js'
import { efficiencyHeader, efficiencyRow, runEfficiency, splitLines } from './efficiency/run.js'
import { efficiencyScenarios } from './efficiency/scenarios.js'
import { benchFailover, benchRestart } from './failover.js'
import { benchHttp, benchHttpInstructions } from './http.js'
import { benchKeys } from './keys.js'
import { benchKeysScale } from './keys-scale.js'
import { benchQuota } from './quota.js'
import { benchRemote, benchRemoteApart, benchRemoteFloor, remoteRow } from './remote.js'
import { benchMassRestart } from './mass-restart.js'
import { benchSafeHold } from './safe-hold.js'

// `npm run bench`: runs every benchmark and prints markdown rows for docs/benchmarks.md.
const only = process.argv[2]
const runs = Number(process.env.BENCH_RUNS ?? 7)

console.log(
  `machine: ${cpus().length} × ${cpus()[0]?.model ?? 'unknown CPU'}, Node ${process.version}`,
)
if (only === undefined || only === 'allocation') {
  console.log('\n## allocation (ms per allocate() call, median of runs, min, max)\n')
  console.log('| algorithm | clients | median ms | min ms | max ms |')
  console.log('| --- | --- | --- | --- | --- |')
  for (const row of benchAllocation([1_000, 10_000, 100_000, 1_000_000], runs)) console.log(row)
}

if (only === undefined || only === 'coordinator') {
  const measureMs = Number(process.env.BENCH_MEASURE_MS ?? 10_000)
  const coordinatorRuns = Number(process.env.BENCH_COORDINATOR_RUNS ?? 5)
  console.log(
    `\n## coordinator${process.env.BENCH_FLOOR === undefined ? '' : ` (BENCH_FLOOR=${process.env.BENCH_FLOOR}: the transport floor, not Sluice)`} (${coordinatorRuns} runs of ${measureMs / 1000} s after a ${Number(process.env.BENCH_WARMUP_MS ?? 3000) / 1000} s warm-up; median (min–max))\n`,
  )
  console.log(
    '| clients | resources | reports measured (1st run) | p50 report→lease ms | p99 report→lease ms | coordinator CPU % | coordinator RSS MB | coordinator event-loop lag p99 ms | ledger writes/s | ledger write p99 ms | leases per client per second | p99 from the latest report to any lease ms (the earlier measure) |',
  )
  console.log('| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |')
  for (const row of await benchCoordinatorRows(coordinatorRuns, measureMs)) console.log(row)
}

if (only === undefined || only === 'client') {
  console.log(
    `\n## client hot path (checks/s on the allow path, median of ${runs} runs (min–max))\n`,
  )
  console.log('| what | checks/s | Sluice ÷ this |')
  console.log('| --- | --- | --- |')
  for (const row of await benchClient(runs)) console.log(row)
}

if (only === undefined || only === 'http') {
  const durationSec = Number(process.env.BENCH_HTTP_SECONDS ?? 5)
  console.log(
    `\n## HTTP edge (requests/s under autocannon, 50 connections, ${durationSec} s per run; median of ${runs} runs (min–max))\n`,
  )
  console.log(
    '| what | requests/s (saturated) | throughput lost | server CPU µs per request at 10k req/s | CPU added | of which user space, µs | user space added |',
  )
  console.log('| --- | --- | --- | --- | --- | --- | --- |')
  for (const row of await benchHttp(runs, durationSec)) console.log(row)
}

// Not in the default set: it needs valgrind and takes about a minute per variant and run.
if (only === 'http-instructions') {
  console.log(
    `\n## HTTP edge, instructions per request (callgrind; 20k requests on one connection, counted after 15k in the same server; median of ${runs} runs (min–max))\n`,
  )
  console.log('| what | instructions per request | added |')
  console.log('| --- | --- | --- |')
  for (const row of await benchHttpInstructions(runs)) console.log(row)
}

if (only === undefined || only === 'failover') {
  const ttlSec = Number(process.env.BENCH_ETCD_TTL ?? 2)
  const failoverRuns = Number(process.env.BENCH_FAILOVER_RUNS ?? 5)
  console.log(
    `\n## failover (3 replicas on one etcd, SIGKILL of the leader; median of ${failoverRuns} runs (min–max))\n`,
  )
  console.log('| what | etcd lease TTL | median | min–max |')
  console.log('| --- | --- | --- | --- |')
  for (const row of await benchFailover(failoverRuns, ttlSec)) console.log(row)
  for (const row of await benchRestart(failoverRuns)) console.log(row)
}

// Not in the default set: about a minute per run at 10k clients.
if (only === 'mass-restart') {
  const clients = Number(process.env.BENCH_CLIENTS ?? 10_000)
  const restartRuns = Number(process.env.BENCH_RUNS ?? 3)
  console.log(
    `\n## mass restart (SIGKILL of sluice serve under ${clients} clients, restart on the same port and data directory; median of ${restartRuns} runs (min–max))\n`,
  )
  console.log('| clients | what | median | min–max |')
  console.log('| --- | --- | --- | --- |')
  for (const row of await benchMassRestart(restartRuns, clients)) console.log(row)
}

if (only === undefined || only === 'e2e') {
  const e2eRuns = Number(process.env.BENCH_E2E_RUNS ?? 5)
  console.log(
    `\n## end to end: ${limitPerSec} requests/s shared by ${demands.length} processes, demands ${demands.join(', ')} /s (median of ${e2eRuns} runs (min–max))\n`,
  )
  console.log(
    '| limiter | delivered req/s | admitted ÷ limit | utilisation | Jain vs max-min | p99 decision µs | CPU µs per decision |',
  )
  console.log('| --- | --- | --- | --- | --- | --- | --- |')
  for (const row of await benchE2e(e2eRuns)) console.log(row)
}

// Not in the default set: it starts redis-server and a coordinator.
if (only === 'keys') {
  console.log(
    `\n## keyed families: per-key limits, 10,000 keys by Zipf(1.1), 20/s per key (one process, one caller; median of ${runs} runs (min–max))\n`,
  )
  console.log(
    '| limiter | decisions/s | p99 per decision | keys past capacity·t + burst (the most of any run) | Sluice ÷ this |',
  )
  console.log('| --- | --- | --- | --- | --- |')
  for (const row of await benchKeys(runs)) console.log(row)
}

// Not in the default set: a coordinator and two gateway processes for a minute or more.
if (only === 'keys-scale') {
  console.log(
    `\n## keyed families at scale: new keys by the million a minute, thousands hot (coordinator read from its /metrics each second)\n`,
  )
  for (const row of await benchKeysScale()) console.log(row)
}

// Not in the default set: it starts redis-server and a coordinator.
if (only === 'quota') {
  console.log(
    `\n## quotas: one daily quota, one process, one caller (median of ${runs} runs (min–max))\n`,
  )
  console.log('| limiter | decisions/s | p99 per decision | admitted | Sluice ÷ this |')
  console.log('| --- | --- | --- | --- | --- |')
  for (const row of await benchQuota(runs)) console.log(row)
}

// Not in the default set: real processes, a few minutes. BENCH_SCENARIO=<text> runs the
// scenarios whose name holds it; <text>$ those whose name ends with it (a scenario without its
// "— remote decisions" twin).
if (only === 'efficiency') {
  const pick = process.env.BENCH_SCENARIO
  console.log(
    '\n## efficiency: Sluice against one exact central limiter on the same trace (real processes, Zipf(1.1) keys, a random balancer)\n',
  )
  for (const line of efficiencyHeader) console.log(line)
  for (const s of efficiencyScenarios)
    if (
      pick === undefined ||
      (pick.endsWith('$') ? s.name.endsWith(pick.slice(0, -1)) : s.name.includes(pick))
    ) {
      const r = await runEfficiency(s)
      console.log(efficiencyRow(r))
      for (const line of splitLines(r)) console.log(line)
    }
}

// Not in the default set: a customer's burst at one gateway of three (bench/burst.ts).
if (only === 'burst') {
  console.log(
    '\n## a new customer\'s 105 requests at once at one gateway of three ("100 per minute" per key; real coordinator, loopback)\n',
  )
  console.log('| customer | gateway | admitted | one central limiter | last answer ms |')
  console.log('| --- | --- | --- | --- | --- |')
  for (const r of await benchBurst())
    console.log(
      `| ${r.customer} | gw-${r.gateway} | ${r.admitted} | ${r.central} | ${r.lastAnswerMs.toFixed(1)} |`,
    )
}

// Not in the default set: a real coordinator. BENCH_REMOTE_PROCESSES, BENCH_REMOTE_PACED (asks/s),
// BENCH_REMOTE_WINDOW (asks in flight per process), BENCH_MEASURE_MS, BENCH_REMOTE_KIND (rate,
// or quota: a keyed quota's answers wait for the ledger when their key is new to the part).
if (only === 'remote') {
  const processes = Number(process.env.BENCH_REMOTE_PROCESSES ?? 6)
  console.log(
    '\n## remote decisions (a crowded keyed family: every check asked of the coordinator, loopback)\n',
  )
  console.log(
    '| phase | processes | asked/s | answered/s | admitted | p50 ms | p99 ms | p99.9 ms |',
  )
  console.log('| --- | --- | --- | --- | --- | --- | --- | --- |')
  const rows = await benchRemote({
    processes,
    keys: 10_000,
    kind: process.env.BENCH_REMOTE_KIND === 'quota' ? 'quota' : 'rate',
    pacedPerSec: Number(process.env.BENCH_REMOTE_PACED ?? 5_000),
    window: Number(process.env.BENCH_REMOTE_WINDOW ?? 64),
    measureMs: Number(process.env.BENCH_MEASURE_MS ?? 5_000),
  })
  for (const r of rows) console.log(remoteRow(r, processes))
  // The paced asks again with each client in a process of its own (bench/remote.ts
  // `benchRemoteApart`): what a gateway fleet sees, without the other clients' work in its loop.
  console.log(
    remoteRow(
      await benchRemoteApart({
        processes,
        keys: 10_000,
        kind: process.env.BENCH_REMOTE_KIND === 'quota' ? 'quota' : 'rate',
        pacedPerSec: Number(process.env.BENCH_REMOTE_PACED ?? 5_000),
        window: 0,
        measureMs: Number(process.env.BENCH_MEASURE_MS ?? 5_000),
      }),
      processes,
    ),
  )
  // The same paced asks over bare `ws` connections to a server that only answers them: the
  // least a round trip takes on this machine (bench/remote.ts `benchRemoteFloor`).
  console.log(
    remoteRow(
      await benchRemoteFloor({
        processes,
        keys: 10_000,
        pacedPerSec: Number(process.env.BENCH_REMOTE_PACED ?? 5_000),
        window: 0,
        measureMs: Number(process.env.BENCH_MEASURE_MS ?? 5_000),
      }),
      processes,
    ),
  )
}

if (only === 'safe-hold') {
  console.log(
    '\n## safe hold (simulator: utilisation under excess demand over the whole run / tokens beyond capacity·t + burst)\n',
  )
  console.log('| scenario | hold 0 | ttl / 4 | ttl / 2 (default) | ttl |')
  console.log('| --- | --- | --- | --- | --- |')
  for (const row of await benchSafeHold()) console.log(row)
}

// rate-limiter-flexible's memory store keeps per-key expiry timers alive; the figures are printed, so stop.
process.exit(0)
