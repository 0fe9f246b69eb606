/**
 * The scenarios of `npm run bench -- efficiency`, after issue #41's table:
 * real processes, Zipf(1.1) keys, a random balancer over the gateways.
 */
export interface EfficiencyScenario {
  readonly name: string
  readonly kind: 'rate' | 'quota'
  /** Rate: per second per key; quota: the budget of a key per window. */
  readonly capacity: number
  /** Rate: the bucket's burst (the family's default: one second of capacity). */
  readonly burst?: number
  /** Quota: the window, ms (windows aligned to the epoch). */
  readonly windowMs?: number
  /** Processes, and the gateways (clients) in each: a gateway is one client. */
  readonly processes: number
  readonly gatewaysPerProcess: number
  readonly keys: number
  /** Requests per second over every gateway and key. */
  readonly ratePerSec: number
  readonly durationMs: number
  /**
   * A rolling deploy: from `firstAtMs`, every `everyMs`, one process after another is closed
   * cleanly (SIGTERM: its clients' `close()`) and a new one started in its place at once.
   */
  readonly deploy?: { readonly firstAtMs: number; readonly everyMs: number }
  /** A new customer's key asked `count` times from `atMs`: at once, or spread over `overMs`. */
  readonly probe?: { readonly atMs: number; readonly count: number; readonly overMs?: number }
  /** The coordinator SIGKILLed at `atMs` and restarted `downMs` later (its ledger kept). */
  readonly coordinatorKill?: { readonly atMs: number; readonly downMs: number }
  /** Process 0 SIGKILLed at `atMs`, a new one started at once. */
  readonly gatewayKill?: { readonly atMs: number }
  /** One more process (its gateways asking as each other process's) started at `atMs`: a scale-up. */
  readonly scaleUp?: { readonly atMs: number }
  /** Checks by remote decisions (`family.decide`, as the HTTP edge), not `tryAcquire` alone. */
  readonly remote?: boolean
  /**
   * Named resources rather than a keyed family: each key is a resource of the glob template
   * `key/*` (`client.resource('key/k3')`), leased on its own by max-min over the gateways'
   * demand, its capacity the whole cluster's.
   */
  readonly named?: boolean
  /** Settings of the family's template beside the defaults (what a setting costs or buys). */
  readonly settings?: { readonly leaseTtlMs?: number; readonly safeHoldMs?: number }
}

const s = 1000

/** Many gateways: a key's burst split 30 ways, below a token at each (a crowded family). */
const thirtyGateways: EfficiencyScenario = {
  name: '30 gateways, 20/s per key, 1,500 req/s over 500 keys',
  kind: 'rate',
  capacity: 20,
  burst: 20,
  processes: 6,
  gatewaysPerProcess: 5,
  keys: 500,
  ratePerSec: 1500,
  durationMs: 30 * s,
}

/** A daily keyed quota through a rolling deploy, then a new customer's burst. */
const daily: EfficiencyScenario = {
  name: 'a daily quota of 100 per key: 3 rolling deploys, then a new customer asks 100',
  kind: 'quota',
  capacity: 100,
  windowMs: 86_400 * s,
  processes: 3,
  gatewaysPerProcess: 1,
  keys: 1000,
  ratePerSec: 60,
  durationMs: 30 * s,
  deploy: { firstAtMs: 5 * s, everyMs: 4 * s },
  probe: { atMs: 25 * s, count: 100 },
}

/** The home case: 3 gateways, 20/s per key, 1,500 req/s over 2,000 keys for 30 s. */
const home: EfficiencyScenario = {
  name: 'home: 3 gateways, 20/s per key, 1,500 req/s over 2,000 keys',
  kind: 'rate',
  capacity: 20,
  burst: 20,
  processes: 3,
  gatewaysPerProcess: 1,
  keys: 2000,
  ratePerSec: 1500,
  durationMs: 30 * s,
}

const gatewayKillScenario: EfficiencyScenario = {
  ...home,
  name: 'home, a gateway SIGKILLed at 10 s and a new one started',
  gatewayKill: { atMs: 10 * s },
}

const tryAcquireScenarios: readonly EfficiencyScenario[] = [
  home,
  {
    ...home,
    name: 'the same, each gateway replaced one after another (rolling deploy)',
    deploy: { firstAtMs: 8 * s, everyMs: 6 * s },
  },
  {
    name: '"100 per minute per key": 3 gateways, 600 req/s over 1,000 keys',
    kind: 'rate',
    capacity: 100 / 60,
    burst: 100,
    processes: 3,
    gatewaysPerProcess: 1,
    keys: 1000,
    ratePerSec: 600,
    durationMs: 60 * s,
  },
  {
    // Five processes hold the family; a sixth crowds it (a default share under a fifth): with
    // remote decisions, every share moves to the coordinator's part, which earns its burst.
    name: '"100 per minute per key": 5 gateways, a 6th joins at 20 s, 500 req/s over 1,000 keys',
    kind: 'rate',
    capacity: 100 / 60,
    burst: 100,
    processes: 5,
    gatewaysPerProcess: 1,
    keys: 1000,
    ratePerSec: 500,
    durationMs: 50 * s,
    scaleUp: { atMs: 20 * s },
  },
  thirtyGateways,
  {
    name: '100 gateways, 20/s per key, 1,500 req/s over 500 keys',
    kind: 'rate',
    capacity: 20,
    burst: 20,
    processes: 10,
    gatewaysPerProcess: 10,
    keys: 500,
    ratePerSec: 1500,
    durationMs: 30 * s,
  },
  {
    ...home,
    name: 'home, the coordinator SIGKILLed at 10 s and restarted 0.5 s later',
    coordinatorKill: { atMs: 10 * s, downMs: 500 },
  },
  gatewayKillScenario,
  {
    name: 'keyed quota, 100 per key per 20 s window, 3 gateways, 600 req/s over 1,000 keys',
    kind: 'quota',
    capacity: 100,
    windowMs: 20 * s,
    processes: 3,
    gatewaysPerProcess: 1,
    keys: 1000,
    ratePerSec: 600,
    durationMs: 60 * s,
  },
  {
    name: 'the same with a rolling deploy',
    kind: 'quota',
    capacity: 100,
    windowMs: 20 * s,
    processes: 3,
    gatewaysPerProcess: 1,
    keys: 1000,
    ratePerSec: 600,
    durationMs: 60 * s,
    deploy: { firstAtMs: 12 * s, everyMs: 9 * s },
  },
  {
    // A budget nobody comes near (a busy key asks half of it): what is lost is the edges'.
    name: 'keyed quota nobody spends, 1,000 per key per 5 s window, 3 gateways, 600 req/s over 1,000 keys',
    kind: 'quota',
    capacity: 1000,
    windowMs: 5 * s,
    processes: 3,
    gatewaysPerProcess: 1,
    keys: 1000,
    ratePerSec: 600,
    durationMs: 30 * s,
  },
  daily,
  {
    ...daily,
    name: 'the same, the new customer asking 100 over 4 s (25/s)',
    probe: { atMs: 24 * s, count: 100, overMs: 4 * s },
  },
]

const namedQuotas: EfficiencyScenario = {
  name: 'named quotas: 10 resources of 1,000 per 5 s window each, 3 gateways, 600 req/s over them',
  kind: 'quota',
  capacity: 1000,
  windowMs: 5 * s,
  processes: 3,
  gatewaysPerProcess: 1,
  keys: 10,
  ratePerSec: 600,
  durationMs: 30 * s,
  named: true,
}

/** Named resources and named quotas (remote decisions are a keyed family's: not run twice). */
const namedScenarios: readonly EfficiencyScenario[] = [
  {
    name: 'named rates: 10 resources of 100/s each, 3 gateways, 1,500 req/s over them',
    kind: 'rate',
    capacity: 100,
    burst: 100,
    processes: 3,
    gatewaysPerProcess: 1,
    keys: 10,
    ratePerSec: 1500,
    durationMs: 30 * s,
    named: true,
  },
  namedQuotas,
  {
    // A budget nobody comes near (the busiest asks a fifth of it): what is lost is the edges'.
    ...namedQuotas,
    name: 'named quotas nobody spends: 10 resources of 10,000 per 5 s window each, 3 gateways, 600 req/s over them',
    capacity: 10_000,
  },
  {
    // The issue's edge target counts the checks within 5 s of an edge: windows longer than
    // 10 s, so that some are not (BENCH_SPLIT=1 BENCH_SPLIT_STEP_MS=5000 splits them).
    ...namedQuotas,
    name: 'named quotas nobody spends, 20 s windows: 10 resources of 40,000 per 20 s each, 3 gateways, 600 req/s over them',
    capacity: 40_000,
    windowMs: 20 * s,
    durationMs: 60 * s,
  },
]

/** A keyed quota over 30 gateways with remote decisions: crowded, decided by the coordinator's part. */
export const crowdedQuota: EfficiencyScenario = {
  name: 'keyed quota, 100 per key per 20 s window, 30 gateways, 600 req/s over 1,000 keys — remote decisions',
  kind: 'quota',
  capacity: 100,
  windowMs: 20 * s,
  processes: 6,
  gatewaysPerProcess: 5,
  keys: 1000,
  ratePerSec: 600,
  durationMs: 60 * s,
  remote: true,
}

/**
 * Each scenario again with remote decisions (`family.decide`, what the HTTP edge and `check`
 * do): a check its gateway's share cannot decide is asked of the coordinator.
 */
export const efficiencyScenarios: readonly EfficiencyScenario[] = [
  ...tryAcquireScenarios,
  ...tryAcquireScenarios.map((x) => ({ ...x, name: `${x.name} — remote decisions`, remote: true })),
  // A crowded family through a restart: the coordinator's own part decides for every gateway,
  // and what the dead coordinator's part held is freed at once by the new one (14709fc; before,
  // it counted until it lapsed, and nothing of the family was admitted meanwhile).
  {
    ...thirtyGateways,
    name: '30 gateways, 20/s per key, the coordinator SIGKILLed at 10 s and restarted 0.5 s later — remote decisions',
    coordinatorKill: { atMs: 10 * s, downMs: 500 },
    remote: true,
  },
  // A keyed quota over as many gateways: crowded too, its keys decided by the coordinator's part.
  crowdedQuota,
  // The same through a restart: what the dead coordinator's part spent of each key is in the
  // ledger (reserved before its answers), so the new part takes its shares less that.
  {
    ...crowdedQuota,
    name: 'keyed quota, 30 gateways, the coordinator SIGKILLed at 10 s and restarted 0.5 s later — remote decisions',
    coordinatorKill: { atMs: 10 * s, downMs: 500 },
  },
  ...namedScenarios,
  // What a killed gateway strands is its leases until they lapse (a process may still run
  // behind a cut, so a closed socket frees nothing): leaseTtlMs + graceMs + safeHoldMs, 17 s by
  // default. Shorter leases strand less, at the cost of more renewals and less time to ride out
  // a coordinator that is down.
  {
    ...gatewayKillScenario,
    name: `${gatewayKillScenario.name}, leases of 3 s (leaseTtlMs: 3000)`,
    settings: { leaseTtlMs: 3000 },
  },
]
