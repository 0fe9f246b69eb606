import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client'
import { FamilyTotals } from './family-totals.js'
import type { FamilyUsageFigures, ResourceFigures } from './view.js'
import { UsageTotals, type UsageColumn } from './usage-totals.js'

/** What the clients' latest reports say of one resource's use. */
export interface ResourceUsage {
  inFlight: number
  waiting: number
  admittedPerSec: number
  refusedPerSec: number
}

const noUsage: ResourceUsage = Object.freeze({
  inFlight: 0,
  waiting: 0,
  admittedPerSec: 0,
  refusedPerSec: 0,
})

/** The per-resource gauges: name, help, and the figure each shows, read at scrape time. */
const resourceGauges: readonly (readonly [
  name: string,
  help: string,
  /** undefined: the gauge has no series for this resource (a quota gauge of a rate). */
  figure: (r: ResourceFigures, u: ResourceUsage) => number | undefined,
])[] = [
  ['sluice_resource_capacity', 'Configured capacity', (r) => r.capacity],
  [
    'sluice_resource_committed',
    'Capacity committed to leases (Σ committed ≤ capacity)',
    (r) => r.committed,
  ],
  ['sluice_resource_free', 'Capacity not committed', (r) => r.free],
  ['sluice_resource_demand', 'Total estimated demand', (r) => r.demand],
  ['sluice_resource_grant', 'Total target grants of the last round', (r) => r.grant],
  ['sluice_resource_clients', 'Clients using the resource', (r) => r.clients],
  [
    'sluice_resource_learning',
    '1 while the resource is in learning mode',
    (r) => (r.learning ? 1 : 0),
  ],
  [
    'sluice_in_flight',
    'Slots in flight at the clients, as their latest reports say (concurrency)',
    (_, u) => u.inFlight,
  ],
  [
    'sluice_waiting',
    'Callers waiting at the clients, as their latest reports say',
    (_, u) => u.waiting,
  ],
  [
    'sluice_admitted_per_second',
    'Tokens or slots the clients admit per second, as their latest reports say',
    (_, u) => u.admittedPerSec,
  ],
  [
    'sluice_refused_per_second',
    'Tokens or slots the clients refuse per second, as their latest reports say',
    (_, u) => u.refusedPerSec,
  ],
  [
    'sluice_quota_used',
    'Quota: units the clients reported used in the current window',
    (r) => r.quota?.used,
  ],
  [
    'sluice_quota_remaining',
    'Quota: capacity less what was used in the current window',
    (r) => r.quota?.remaining,
  ],
  [
    'sluice_quota_window_ends_in_seconds',
    'Quota: seconds until the current window ends and a new budget opens',
    (r) => (r.quota === undefined ? undefined : r.quota.endsInMs / 1000),
  ],
]

/** The usage counters: column of the totals, name, help. */
const usageCounters: readonly (readonly [column: UsageColumn, name: string, help: string])[] = [
  [
    'admitted',
    'sluice_admitted_total',
    'Tokens (rate) or slots (concurrency) the clients admitted, as they report it',
  ],
  [
    'refused',
    'sluice_refused_total',
    'Tokens or slots the clients refused (police) or gave up waiting for, as they report it',
  ],
  ['admittedCalls', 'sluice_admitted_calls_total', 'Calls the clients admitted, as they report it'],
  [
    'refusedCalls',
    'sluice_refused_calls_total',
    'Calls the clients refused or that gave up waiting, as they report it',
  ],
]

/** Prometheus metrics of one coordinator, on a registry of its own (several may share a process). */
export class CoordinatorMetrics {
  readonly registry = new Registry()
  readonly #registers = [this.registry]
  /** Usage as reports add it, handed to the four usage counters when they are scraped. */
  readonly usageTotals: UsageTotals
  /** What keyed families admitted and refused across their keys, handed to their counters. */
  readonly familyTotals = new FamilyTotals()

  constructor(
    resources: () => readonly ResourceFigures[],
    usage: (id: string) => ResourceUsage = () => noUsage,
    maxUsageSeries: () => number = () => 10_000,
    families: () => readonly FamilyUsageFigures[] = () => [],
  ) {
    this.usageTotals = new UsageTotals(maxUsageSeries)
    // Process metrics (CPU, memory, event-loop lag, GC): what an operator checks first.
    collectDefaultMetrics({ register: this.registry, prefix: 'sluice_' })
    const gauges = resourceGauges.map(
      ([name, help, figure]) =>
        [new Gauge({ name, help, labelNames: ['resource'], registers: [] }), figure] as const,
    )
    // Per-resource gauges are read at scrape time, so a round costs nothing extra. Registered
    // first: the registry collects in order, and this collect fills the gauges below it.
    new Gauge({
      name: 'sluice_resources',
      help: 'Resources with clients, and named resources of the config no client uses yet',
      registers: this.#registers,
      collect() {
        for (const [g] of gauges) g.reset()
        const all = resources()
        for (const r of all) {
          const labels = { resource: r.id }
          const u = usage(r.id)
          for (const [g, figure] of gauges) {
            const value = figure(r, u)
            if (value !== undefined) g.set(labels, value)
          }
        }
        this.set(all.length)
      },
    })
    for (const [g] of gauges) this.registry.registerMetric(g)
    // Keyed families: a series per family, never per key (keys are many).
    const hotKeys = new Gauge({
      name: 'sluice_family_hot_keys',
      help: 'Keys of a keyed family leased one by one now (the rest go by the default share)',
      labelNames: ['family'],
      registers: [],
    })
    const familyGauge = (name: string, help: string) =>
      new Gauge({ name, help, labelNames: ['family'], registers: [] })
    const keyCapacity = familyGauge(
      'sluice_family_key_capacity',
      "A key's capacity: tokens per second (rate), units per window (quota) or slots",
    )
    const admittedPerSec = familyGauge(
      'sluice_family_admitted_per_second',
      'Tokens or units every key of the family admits per second together, as the processes report it',
    )
    const refusedPerSec = familyGauge(
      'sluice_family_refused_per_second',
      'Tokens or units every key of the family refuses per second together, as the processes report it',
    )
    const windowUsed = familyGauge(
      'sluice_family_window_used',
      'Keyed quota: units admitted across all its keys in the window in force, as reported',
    )
    const windowEndsIn = familyGauge(
      'sluice_family_window_ends_in_seconds',
      'Keyed quota: seconds until the window in force ends and every key has its budget again',
    )
    const byFamily = [hotKeys, keyCapacity, admittedPerSec, refusedPerSec, windowUsed, windowEndsIn]
    new Gauge({
      name: 'sluice_family_holders',
      help: 'Processes holding a keyed family (a default share of every key, or asking for one)',
      labelNames: ['family'],
      registers: this.#registers,
      collect() {
        this.reset()
        for (const g of byFamily) g.reset()
        for (const f of families()) {
          const labels = { family: f.id }
          this.set(labels, f.holders)
          hotKeys.set(labels, f.hotKeys)
          keyCapacity.set(labels, f.keyCapacity)
          admittedPerSec.set(labels, f.admittedPerSec)
          refusedPerSec.set(labels, f.refusedPerSec)
          if (f.window !== undefined) {
            windowUsed.set(labels, f.windowUsed ?? 0)
            windowEndsIn.set(labels, f.window.endsInMs / 1000)
          }
        }
      },
    })
    for (const g of byFamily) this.registry.registerMetric(g)
    const familyTotals = this.familyTotals
    for (const column of ['admitted', 'refused'] as const)
      new Counter({
        name: `sluice_family_${column}_total`,
        help: `Tokens or units ${column} across every key of the family, as the processes report it`,
        labelNames: ['family'] as const,
        registers: this.#registers,
        collect() {
          familyTotals.flush(column, this)
        },
      })
    const totals = this.usageTotals
    const registers = this.#registers
    const [admitted, refused, admittedCalls, refusedCalls] = usageCounters.map(
      ([column, name, help]) =>
        new Counter({
          name,
          help,
          labelNames: ['resource', 'tenant'] as const,
          registers,
          collect() {
            totals.flush(column, this)
          },
        }),
    )
    this.admitted = admitted!
    this.refused = refused!
    this.admittedCalls = admittedCalls!
    this.refusedCalls = refusedCalls!
  }

  #counter<L extends string = never>(name: string, help: string, labels: L[] = []): Counter<L> {
    return new Counter({ name, help, labelNames: labels, registers: this.#registers })
  }

  #gauge(name: string, help: string): Gauge {
    return new Gauge({ name, help, registers: this.#registers })
  }

  #histogram(name: string, help: string, buckets: number[]): Histogram {
    return new Histogram({ name, help, buckets, registers: this.#registers })
  }

  readonly rounds = this.#counter('sluice_rounds_total', 'Allocation rounds run', ['resource'])
  /** Remote decisions by family and outcome: a series per family, never per key. */
  readonly remoteDecisions = this.#counter(
    'sluice_remote_decisions_total',
    'Checks processes asked the coordinator to decide (remote decisions), by family and outcome: admitted, refused (its own part of the key could not admit), over_budget (past maxAsksPerSec or the tenant budget), undecidable (no keyed family of that name, or slots)',
    ['family', 'outcome'],
  )
  readonly roundSeconds = this.#histogram(
    'sluice_round_duration_seconds',
    'Time one round takes (allocation and lease planning)',
    [0.0001, 0.0005, 0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1],
  )
  readonly pushes = this.#counter('sluice_lease_messages_total', 'Lease batches sent to clients')
  readonly acks = this.#counter('sluice_acks_total', 'Lease acknowledgements received')
  readonly errors = this.#counter('sluice_errors_total', 'Errors sent or closes caused, by code', [
    'code',
  ])
  readonly connections = this.#gauge('sluice_connections', 'Open client connections')
  readonly reloads = this.#counter('sluice_config_reloads_total', 'Config reloads by outcome', [
    'outcome',
  ])
  readonly isLeader = this.#gauge(
    'sluice_leader',
    '1 while this replica leads (always 1 without high availability)',
  )
  readonly ledgerWrites = this.#counter(
    'sluice_ledger_writes_total',
    'Ledger writes (each covers the lease batches waiting for it)',
  )
  readonly ledgerWriteSeconds = this.#histogram(
    'sluice_ledger_write_seconds',
    'Time a ledger write takes, until it is durable',
    [0.0005, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.25, 0.5, 1],
  )
  readonly authFailures = this.#counter(
    'sluice_auth_failures_total',
    'Failed authentications (wrong or missing token), by surface (websocket, http)',
    ['surface'],
  )
  readonly authThrottled = this.#counter(
    'sluice_auth_throttled_total',
    'Authentication attempts refused unchecked: too many failures from the address',
    ['surface'],
  )
  readonly leaderChanges = this.#counter(
    'sluice_role_changes_total',
    'Role changes of this replica, by the role taken (leader, follower)',
    ['to'],
  )
  readonly admitted: Counter<'resource' | 'tenant'>
  readonly refused: Counter<'resource' | 'tenant'>
  readonly admittedCalls: Counter<'resource' | 'tenant'>
  readonly refusedCalls: Counter<'resource' | 'tenant'>
}
