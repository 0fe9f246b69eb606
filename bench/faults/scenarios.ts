import type { FailureMode } from '../../shared/index.js'
import type { FaultAction, FaultClientGroup, FaultResource, FaultScenario } from './harness.js'

// Short lease times, so a scenario shows every phase (lease, lapse, fallback, hold, recovery)
// in seconds: a commitment lives 2 + 0.5 + 1 = 3.5 s.
const times = { leaseTtlMs: 2000, refreshMs: 250, graceMs: 500, safeHoldMs: 1000 } as const
const api: FaultResource = { id: 'api', kind: 'rate', capacity: 1000, ...times }
const db: FaultResource = { id: 'db', kind: 'concurrency', capacity: 20, ...times }
// Longer leases and a small burst, for restarts: what cut-off clients still enforce after a
// restart that forgot them (4 s of lease, then 2 s of fallback) is thousands of tokens beyond
// the bound, not hidden in a second of burst.
const longApi: FaultResource = {
  id: 'api',
  kind: 'rate',
  capacity: 1000,
  burst: 200,
  leaseTtlMs: 4000,
  refreshMs: 250,
  graceMs: 500,
  safeHoldMs: 2000,
}

const rateClients = (count: number, failureMode: FailureMode = 'safe'): FaultClientGroup => ({
  prefix: 'c',
  count,
  resources: [{ id: 'api', wants: 400, failureMode }],
})

const slotClients = (count: number, failureMode: FailureMode = 'safe'): FaultClientGroup => ({
  prefix: 'w',
  count,
  resources: [{ id: 'db', wants: 6, failureMode, holdMs: 150 }],
})

const slotPartition = (mode: FailureMode): FaultScenario => ({
  name: `slots partition, ${mode}`,
  description: `3 of 6 clients of a 20-slot resource cut off for 5 s (each wants 6 slots, held 150 ms), ${mode} mode`,
  durationMs: 14_000,
  heartbeatMs: 1000,
  resources: [db],
  clients: [slotClients(6, mode)],
  actions: [
    { atMs: 5000, type: 'link', clients: 'w-0', mode: 'cut' },
    { atMs: 5000, type: 'link', clients: 'w-1', mode: 'cut' },
    { atMs: 5000, type: 'link', clients: 'w-2', mode: 'cut' },
    { atMs: 10_000, type: 'link', clients: 'w', mode: 'open' },
  ],
})

const partition = (mode: FailureMode): FaultScenario => ({
  name: `partition, ${mode}`,
  description: `3 of 6 rate clients cut off (connections reset, reconnects refused) for 5 s, ${mode} mode`,
  durationMs: 14_000,
  heartbeatMs: 1000,
  resources: [api],
  clients: [rateClients(6, mode)],
  actions: [
    { atMs: 5000, type: 'link', clients: 'c-0', mode: 'cut' },
    { atMs: 5000, type: 'link', clients: 'c-1', mode: 'cut' },
    { atMs: 5000, type: 'link', clients: 'c-2', mode: 'cut' },
    { atMs: 10_000, type: 'link', clients: 'c', mode: 'open' },
  ],
})

/**
 * A restart that must not forget what two cut-off clients still enforce: 4 rate clients, 2 of
 * them cut at 7.5 s (they keep their leases, then their safe fallback), the coordinator
 * SIGKILLed at 7.8 s and back at 8.3 s, after `between` (its ledger damaged, say), and with
 * `wallOffsetSec` its wall clock stepped; the links heal at 15 s. The cut comes after a
 * commitment life (6.5 s), so a build that learns at its first start has leased by then too.
 */
const ledgerRestart = (
  name: string,
  description: string,
  between: readonly FaultAction[],
  wallOffsetSec?: number,
): FaultScenario => ({
  name,
  description,
  durationMs: 17_000,
  heartbeatMs: 1000,
  resources: [longApi],
  clients: [rateClients(4)],
  actions: [
    { atMs: 7500, type: 'link', clients: 'c-0', mode: 'cut' },
    { atMs: 7500, type: 'link', clients: 'c-1', mode: 'cut' },
    { atMs: 7800, type: 'kill' },
    ...between,
    { atMs: 8300, type: 'restart', wallOffsetSec },
    { atMs: 15_000, type: 'link', clients: 'c', mode: 'open' },
  ],
})

/** Every scenario of `npm run faults`; `ci` marks the ones the test suite runs. */
export const faultScenarios: readonly (FaultScenario & { readonly ci?: boolean })[] = [
  { ...partition('safe'), ci: true },
  {
    name: 'stall, safe',
    description: '2 of 6 rate clients black-holed (nothing passes, no reset) for 6 s',
    durationMs: 14_000,
    heartbeatMs: 1000,
    resources: [api],
    clients: [rateClients(6)],
    actions: [
      { atMs: 5000, type: 'link', clients: 'c-0', mode: 'stalled' },
      { atMs: 5000, type: 'link', clients: 'c-1', mode: 'stalled' },
      { atMs: 11_000, type: 'link', clients: 'c', mode: 'open' },
    ],
    ci: true,
  },
  { ...slotPartition('safe'), ci: true },
  {
    name: 'SIGKILL and restart',
    description:
      'the coordinator killed at 6 s and restarted at 7 s: it learns for a commitment life',
    durationMs: 15_000,
    heartbeatMs: 1000,
    resources: [api, db],
    clients: [rateClients(4), slotClients(4)],
    actions: [
      { atMs: 6000, type: 'kill' },
      { atMs: 7000, type: 'restart' },
    ],
    ci: true,
  },
  {
    name: 'moving demand, spare capacity, then a cut',
    description:
      '6 rate clients wanting 100 ± 15% (a new value every 250 ms) of 1000, so spread leases stay within the headroom tolerance; 2 cut off at 4 s; capacity 1000 → 500 at 7 s (every lease must move); healed and back to 1000 at 10 s',
    durationMs: 14_000,
    heartbeatMs: 1000,
    resources: [api],
    clients: [
      {
        prefix: 'v',
        count: 6,
        resources: [{ id: 'api', wants: 100, failureMode: 'safe', swing: 0.15 }],
      },
    ],
    actions: [
      { atMs: 4000, type: 'link', clients: 'v-0', mode: 'cut' },
      { atMs: 4000, type: 'link', clients: 'v-1', mode: 'cut' },
      { atMs: 7000, type: 'capacity', resource: 'api', capacity: 500 },
      { atMs: 10_000, type: 'link', clients: 'v', mode: 'open' },
      { atMs: 10_000, type: 'capacity', resource: 'api', capacity: 1000 },
    ],
    // 106 with the default headroomTolerance, 304 with 0 (docs/operations.md).
    maxLeases: 200,
    ci: true,
  },
  ...(['first-line', 'half', 'empty'] as const).map((how) => ({
    ...ledgerRestart(
      `damaged ledger (${how})`,
      `2 of 4 clients cut at 7.5 s; SIGKILL at 7.8 s; the ledger file ${how === 'empty' ? 'emptied' : `truncated to ${how === 'half' ? 'half' : 'its first line'}`}; restart at 8.3 s: corrupt, so it learns`,
      [{ atMs: 8000, type: 'damage', how }],
    ),
    // The first line's and the half's cases run in `npm run faults` only (CI time): the emptied
    // file's is the one that went over before its rule (docs/operations.md).
    ci: how === 'empty',
  })),
  {
    ...ledgerRestart(
      'wall clock stepped ahead across a restart',
      '2 of 4 clients cut at 7.5 s; SIGKILL at 7.8 s; restart at 8.3 s with the wall clock 30 s ahead: restored leases keep their whole remaining life',
      [],
      30,
    ),
    ci: true,
  },
  {
    ...ledgerRestart(
      'wall clock stepped back across a restart',
      '2 of 4 clients cut at 7.5 s; SIGKILL at 7.8 s; restart at 8.3 s with the wall clock 30 s behind',
      [],
      -30,
    ),
  },
  {
    name: 'full disk, then a restart',
    description:
      'the coordinator under a 12 KiB file-size limit: its ledger fills up mid-run (writes fail, leases lapse to safe); SIGKILL at 9 s, restart without the limit at 9.5 s, 2 clients cut across it',
    durationMs: 16_000,
    heartbeatMs: 1000,
    resources: [longApi],
    clients: [rateClients(4)],
    fileLimitKiB: 12,
    // Once the disk is full nothing is leased until the restart: little is admitted by design.
    minUtilisation: 0.1,
    actions: [
      { atMs: 8800, type: 'link', clients: 'c-0', mode: 'cut' },
      { atMs: 8800, type: 'link', clients: 'c-1', mode: 'cut' },
      { atMs: 9000, type: 'kill' },
      { atMs: 9500, type: 'restart' },
      { atMs: 14_000, type: 'link', clients: 'c', mode: 'open' },
    ],
    ci: true,
  },
  partition('pessimistic'),
  partition('optimistic'),
  slotPartition('pessimistic'),
  slotPartition('optimistic'),
  {
    name: 'slow disk, then it recovers',
    description:
      'every fdatasync of the ledger 1.5 s longer (strace), server.ledgerMaxWriteMs 100: batches go out 1.4 s or more late, their leases shortened by as much; 2 of 4 clients cut at 7.5 s; the disk fast again at 8 s',
    durationMs: 16_000,
    heartbeatMs: 1000,
    resources: [longApi],
    clients: [rateClients(4)],
    slowDisk: { fsyncMs: 1500, ledgerMaxWriteMs: 100 },
    ci: true,
    actions: [
      { atMs: 7500, type: 'link', clients: 'c-0', mode: 'cut' },
      { atMs: 7500, type: 'link', clients: 'c-1', mode: 'cut' },
      { atMs: 8000, type: 'disk recovers' },
      { atMs: 14_000, type: 'link', clients: 'c', mode: 'open' },
    ],
  },
  {
    name: 'stall, then capacity cut',
    description:
      '2 of 6 rate clients black-holed at 5 s; capacity 1000 → 300 at 5.5 s; healed at 11 s',
    durationMs: 16_000,
    heartbeatMs: 1000,
    resources: [api],
    clients: [rateClients(6)],
    actions: [
      { atMs: 5000, type: 'link', clients: 'c-0', mode: 'stalled' },
      { atMs: 5000, type: 'link', clients: 'c-1', mode: 'stalled' },
      { atMs: 5500, type: 'capacity', resource: 'api', capacity: 300 },
      { atMs: 11_000, type: 'link', clients: 'c', mode: 'open' },
    ],
  },
  {
    name: 'two resources, flapping links',
    description:
      '4 clients, each using api (rate) and db (slots); two of them cut and healed every 1.5 s, capacities cut mid-way',
    durationMs: 16_000,
    heartbeatMs: 1000,
    resources: [api, db],
    clients: [
      {
        prefix: 'm',
        count: 4,
        resources: [
          { id: 'api', wants: 400, failureMode: 'safe' },
          { id: 'db', wants: 8, failureMode: 'safe', holdMs: 400 },
        ],
      },
    ],
    actions: [
      ...[4000, 7000, 10_000].flatMap((at) => [
        { atMs: at, type: 'link' as const, clients: 'm-0', mode: 'cut' as const },
        { atMs: at + 1500, type: 'link' as const, clients: 'm-0', mode: 'open' as const },
        { atMs: at + 700, type: 'link' as const, clients: 'm-1', mode: 'stalled' as const },
        { atMs: at + 2200, type: 'link' as const, clients: 'm-1', mode: 'open' as const },
      ]),
      { atMs: 8000, type: 'capacity', resource: 'api', capacity: 600 },
    ],
  },
  {
    name: 'duplicate client id',
    description:
      'at 6 s a second process starts with the id of c-0; c-0 is told 4409, drops to 0 and comes back as a new id',
    durationMs: 14_000,
    heartbeatMs: 1000,
    resources: [api],
    clients: [rateClients(4)],
    actions: [{ atMs: 6000, type: 'duplicate', client: 'c-0' }],
  },
  {
    name: 'coordinator paused (SIGSTOP 4 s)',
    description:
      'the coordinator frozen for 4 s: clients notice within two heartbeats, run out their leases, reconnect',
    durationMs: 15_000,
    heartbeatMs: 1000,
    resources: [api],
    clients: [rateClients(4)],
    actions: [{ atMs: 6000, type: 'pause', forMs: 4000 }],
  },
  {
    name: 'SIGKILL and restart, learningMs 0 (unsafe)',
    description: 'as the restart above, with learning switched off: what unsafeLearning risks',
    durationMs: 12_000,
    heartbeatMs: 1000,
    resources: [{ ...api, learningMs: 0 }],
    clients: [rateClients(4)],
    actions: [
      { atMs: 5000, type: 'kill' },
      { atMs: 5500, type: 'restart' },
    ],
    templateExtra: { unsafeLearning: true },
  },
]
