import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client'
import type { ResourceFigures } from './view.js'
import { UsageTotals, type UsageColumn } from './usage-totals.js'

/** Prometheus metrics of one coordinator, on a registry of its own (several may share a process). */
export class CoordinatorMetrics {
  readonly registry = new Registry()
  readonly rounds: Counter<'resource'>
  readonly roundSeconds: Histogram
  readonly pushes: Counter
  readonly acks: Counter
  readonly errors: Counter<'code'>
  readonly connections: Gauge
  readonly reloads: Counter<'outcome'>
  readonly isLeader: Gauge
  readonly leaderChanges: Counter<'to'>
  readonly authFailures: Counter<'surface'>
  readonly ledgerWrites: Counter
  readonly ledgerWriteSeconds: Histogram
  readonly authThrottled: Counter<'surface'>
  readonly admitted: Counter<'resource' | 'tenant'>
  readonly refused: Counter<'resource' | 'tenant'>
  readonly admittedCalls: Counter<'resource' | 'tenant'>
  readonly refusedCalls: Counter<'resource' | 'tenant'>
  /** Usage as reports add it, handed to the four usage counters when they are scraped. */
  readonly usageTotals: UsageTotals

  constructor(
    resources: () => readonly ResourceFigures[],
    usage: (id: string) => {
      inFlight: number
      waiting: number
      admittedPerSec: number
      refusedPerSec: number
    } = () => ({
      inFlight: 0,
      waiting: 0,
      admittedPerSec: 0,
      refusedPerSec: 0,
    }),
    maxUsageSeries: () => number = () => 10_000,
  ) {
    this.usageTotals = new UsageTotals(maxUsageSeries)
    const totals = this.usageTotals
    const registers = [this.registry]
    // Process metrics (CPU, memory, event-loop lag, GC): what an operator checks first.
    collectDefaultMetrics({ register: this.registry, prefix: 'sluice_' })
    const perResource = (name: string, help: string): Gauge<'resource'> =>
      new Gauge({ name, help, labelNames: ['resource'], registers: [] })
    const gauges = {
      capacity: perResource('sluice_resource_capacity', 'Configured capacity'),
      committed: perResource(
        'sluice_resource_committed',
        'Capacity committed to leases (Σ committed ≤ capacity)',
      ),
      free: perResource('sluice_resource_free', 'Capacity not committed'),
      demand: perResource('sluice_resource_demand', 'Total estimated demand'),
      grant: perResource('sluice_resource_grant', 'Total target grants of the last round'),
      clients: perResource('sluice_resource_clients', 'Clients using the resource'),
      learning: perResource('sluice_resource_learning', '1 while the resource is in learning mode'),
      inFlight: perResource(
        'sluice_in_flight',
        'Slots in flight at the clients, as their latest reports say (concurrency)',
      ),
      waiting: perResource(
        'sluice_waiting',
        'Callers waiting at the clients, as their latest reports say',
      ),
      admittedRate: perResource(
        'sluice_admitted_per_second',
        'Tokens or slots the clients admit per second, as their latest reports say',
      ),
      refusedRate: perResource(
        'sluice_refused_per_second',
        'Tokens or slots the clients refuse per second, as their latest reports say',
      ),
    }
    // Per-resource gauges are read at scrape time, so a round costs nothing extra. Registered
    // first: the registry collects in order, and this collect fills the gauges below it.
    new Gauge({
      name: 'sluice_resources',
      help: 'Resources with clients',
      registers,
      collect() {
        for (const g of Object.values(gauges)) g.reset()
        const all = resources()
        for (const r of all) {
          const labels = { resource: r.id }
          gauges.capacity.set(labels, r.capacity)
          gauges.committed.set(labels, r.committed)
          gauges.free.set(labels, r.free)
          gauges.demand.set(labels, r.demand)
          gauges.grant.set(labels, r.grant)
          gauges.clients.set(labels, r.clients)
          gauges.learning.set(labels, r.learning ? 1 : 0)
          const u = usage(r.id)
          gauges.inFlight.set(labels, u.inFlight)
          gauges.waiting.set(labels, u.waiting)
          gauges.admittedRate.set(labels, u.admittedPerSec)
          gauges.refusedRate.set(labels, u.refusedPerSec)
        }
        this.set(all.length)
      },
    })
    for (const g of Object.values(gauges)) this.registry.registerMetric(g)
    this.rounds = new Counter({
      name: 'sluice_rounds_total',
      help: 'Allocation rounds run',
      labelNames: ['resource'],
      registers,
    })
    this.roundSeconds = new Histogram({
      name: 'sluice_round_duration_seconds',
      help: 'Time one round takes (allocation and lease planning)',
      buckets: [0.0001, 0.0005, 0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1],
      registers,
    })
    this.pushes = new Counter({
      name: 'sluice_lease_messages_total',
      help: 'Lease batches sent to clients',
      registers,
    })
    this.acks = new Counter({
      name: 'sluice_acks_total',
      help: 'Lease acknowledgements received',
      registers,
    })
    this.errors = new Counter({
      name: 'sluice_errors_total',
      help: 'Errors sent or closes caused, by code',
      labelNames: ['code'],
      registers,
    })
    this.connections = new Gauge({
      name: 'sluice_connections',
      help: 'Open client connections',
      registers,
    })
    this.reloads = new Counter({
      name: 'sluice_config_reloads_total',
      help: 'Config reloads by outcome',
      labelNames: ['outcome'],
      registers,
    })
    this.isLeader = new Gauge({
      name: 'sluice_leader',
      help: '1 while this replica leads (always 1 without high availability)',
      registers,
    })
    this.ledgerWrites = new Counter({
      name: 'sluice_ledger_writes_total',
      help: 'Ledger writes (each covers the lease batches waiting for it)',
      registers,
    })
    this.ledgerWriteSeconds = new Histogram({
      name: 'sluice_ledger_write_seconds',
      help: 'Time a ledger write takes, until it is durable',
      buckets: [0.0005, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.25, 0.5, 1],
      registers,
    })
    this.authFailures = new Counter({
      name: 'sluice_auth_failures_total',
      help: 'Failed authentications (wrong or missing token), by surface (websocket, http)',
      labelNames: ['surface'],
      registers,
    })
    this.authThrottled = new Counter({
      name: 'sluice_auth_throttled_total',
      help: 'Authentication attempts refused unchecked: too many failures from the address',
      labelNames: ['surface'],
      registers,
    })
    const usageCounter = (
      column: UsageColumn,
      name: string,
      help: string,
    ): Counter<'resource' | 'tenant'> =>
      new Counter({
        name,
        help,
        labelNames: ['resource', 'tenant'],
        registers,
        collect() {
          totals.flush(column, this)
        },
      })
    this.admitted = usageCounter(
      'admitted',
      'sluice_admitted_total',
      'Tokens (rate) or slots (concurrency) the clients admitted, as they report it',
    )
    this.refused = usageCounter(
      'refused',
      'sluice_refused_total',
      'Tokens or slots the clients refused (police) or gave up waiting for, as they report it',
    )
    this.admittedCalls = usageCounter(
      'admittedCalls',
      'sluice_admitted_calls_total',
      'Calls the clients admitted, as they report it',
    )
    this.refusedCalls = usageCounter(
      'refusedCalls',
      'sluice_refused_calls_total',
      'Calls the clients refused or that gave up waiting, as they report it',
    )
    this.leaderChanges = new Counter({
      name: 'sluice_role_changes_total',
      help: 'Role changes of this replica, by the role taken (leader, follower)',
      labelNames: ['to'],
      registers,
    })
  }
}
