import { z } from 'zod'
import { SluiceError, describeIssues, domainLimits, failureModes } from '../../shared/index.js'
import { readYamlFile, resourceTemplateSchema } from '../config/index.js'

const sec = z
  .number()
  .min(0)
  .max(7 * 24 * 3600)
const rate = z.number().min(0).max(1e9)

/** Demand over time of each client of a group, in tokens/s (rate) or slots (concurrency). */
export const demandCurveSchema = z.discriminatedUnion('type', [
  z.strictObject({ type: z.literal('constant'), rate }),
  /** [atSec, rate] pairs: the rate from each time on. */
  z.strictObject({
    type: z.literal('steps'),
    steps: z.array(z.tuple([sec, rate])).min(1),
  }),
  z.strictObject({
    type: z.literal('ramp'),
    from: rate,
    to: rate,
    startSec: sec,
    endSec: sec,
  }),
  /** A seeded random walk: every `everySec`, a step uniform in ±stepMax, kept in [min, max]. */
  z.strictObject({
    type: z.literal('randomWalk'),
    start: rate,
    stepMax: rate,
    min: rate.default(0),
    max: rate,
    everySec: z.number().min(0.1).max(3600).default(1),
  }),
])

export const clientGroupSchema = z.strictObject({
  /** Clients are named `<id>-0`, `<id>-1`, …; one client with count 1 is named `<id>`. */
  id: z.string().regex(/^[A-Za-z0-9._-]{1,64}$/),
  count: z.number().int().min(1).max(100_000).default(1),
  resource: z.string().min(1),
  weight: z.number().min(domainLimits.minWeight).max(domainLimits.maxWeight).default(1),
  failureMode: z.enum(failureModes).default('safe'),
  joinSec: sec.default(0),
  /** Each client joins at joinSec plus a random delay up to this, so their report timers are out of phase. */
  joinSpreadSec: sec.default(1),
  leaveSec: sec.optional(),
  /**
   * `resource` is a keyed family (`<prefix>/*`): each client asks for keys k0 … k(count−1)
   * drawn by Zipf(zipf), `demand` requests a second over all of them.
   */
  keys: z
    .strictObject({
      count: z.number().int().min(1).max(10_000_000),
      zipf: z.number().min(0).max(5).default(1.1),
    })
    .optional(),
  demand: demandCurveSchema,
})

export const eventSchema = z.discriminatedUnion('type', [
  /** The coordinator process dies; a new one (a new leader) serves after `coordinator.failoverMs`. */
  z.strictObject({ type: z.literal('crash'), atSec: sec }),
  z.strictObject({
    type: z.literal('capacity'),
    atSec: sec,
    resource: z.string().min(1),
    capacity: rate,
  }),
  /** Clients whose id starts with `clients` lose the network for `durationSec`. */
  z.strictObject({
    type: z.literal('partition'),
    atSec: sec,
    clients: z.string().min(1),
    durationSec: z
      .number()
      .min(0.001)
      .max(24 * 3600),
  }),
])

export const scenarioSchema = z.strictObject({
  name: z.string().regex(/^[A-Za-z0-9._-]{1,100}$/),
  description: z.string().default(''),
  seed: z.number().int().default(1),
  durationSec: z
    .number()
    .min(1)
    .max(7 * 24 * 3600),
  /** Admission step: each client admits what its demand asks for in one tick. */
  tickMs: z.number().int().min(1).max(10_000).default(100),
  /** CSV row and chart point period. */
  sampleMs: z.number().int().min(10).max(600_000).default(1000),
  network: z
    .strictObject({
      latencyMs: z.number().min(0).max(60_000).default(1),
      jitterMs: z.number().min(0).max(60_000).default(0),
      /** Probability that a message's packet is lost: TCP resends it after 200 ms, 400 ms, …; what follows waits. */
      loss: z.number().min(0).max(0.5).default(0),
    })
    .prefault({}),
  coordinator: z
    .strictObject({
      /** Time from a crash to a new leader serving. */
      failoverMs: z.number().int().min(0).max(3_600_000).default(5000),
      /** Random crashes, exponentially spaced with this mean; absent: only the listed ones. */
      meanTimeBetweenCrashesSec: z.number().min(1).optional(),
      /** A client's connection is declared dead after this silence (the coordinator's heartbeat). */
      heartbeatMs: z.number().int().min(10).max(600_000).default(5000),
      /** Coordinators keep a ledger that survives their crashes (as the real one does); false: they learn. */
      ledger: z.boolean().default(true),
    })
    .prefault({}),
  resources: z.array(resourceTemplateSchema).min(1),
  clients: z.array(clientGroupSchema).min(1),
  events: z.array(eventSchema).default([]),
  /** What the run must show; `sluice simulate` exits 1 when one fails. */
  expect: z
    .strictObject({
      minUtilisation: z.number().min(0).max(1).optional(),
      maxOverAdmission: z.number().min(0).optional(),
      maxConvergenceRefreshes: z.number().min(0).optional(),
      minJain: z.number().min(0).max(1).optional(),
      /** Quota: the most budget (a share of capacity) left stranded at a whole window's end. */
      maxStranded: z.number().min(0).max(1).optional(),
      /** Keyed families: the 20 most asked-for keys' admitted ÷ min(capacity·t, asked), outside failovers. */
      minHotShare: z.number().min(0).max(2).optional(),
      /** Keyed families: the share of keys' first checks (anywhere) admitted. */
      minFirstAdmitted: z.number().min(0).max(1).optional(),
    })
    .default({}),
})

export type ScenarioInput = z.input<typeof scenarioSchema>
export type Scenario = z.output<typeof scenarioSchema>
export type DemandSpec = z.output<typeof demandCurveSchema>

/** Validates a scenario; the error names each bad field. */
export function parseScenario(input: unknown, source = 'scenario'): Scenario {
  const result = scenarioSchema.safeParse(input)
  if (!result.success)
    throw new SluiceError('SLUICE_ERR_CLI_INPUT', `${source}: ${describeIssues(result.error)}`)
  return result.data
}

/** Reads and validates a YAML or JSON scenario file. */
export async function loadScenarioFile(path: string): Promise<Scenario> {
  return parseScenario(
    await readYamlFile(path, 'SLUICE_ERR_CLI_INPUT', 'SLUICE_ERR_CLI_INPUT'),
    path,
  )
}
