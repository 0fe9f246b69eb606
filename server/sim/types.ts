import type { KeyedFamily, Resource, SluiceClient } from '../../client/index.js'
import type { FailureMode, ResourceKind } from '../../shared/index.js'
import type { Config, WindowSpec } from '../config/index.js'
import type { DemandCurve } from './demand.js'
import type { FamilySummary } from './families.js'
import type { Scenario } from './scenario.js'

/** One CSV row: one resource at one sample time. */
export interface SampleRow {
  readonly tSec: number
  readonly resource: string
  readonly capacity: number
  readonly demand: number
  readonly admittedRate: number
  /** Σ capacity the clients enforce, at its highest over the sample's ticks. */
  readonly enforced: number
  /** Σ committed at the coordinator (0 while it is down). */
  readonly committed: number
  readonly jain: number
  /** max over clients of |grant − ideal| ÷ max(ideal, capacity / clients). */
  readonly maxDeviation: number
  readonly clients: number
}

export interface ConvergenceRecord {
  readonly event: string
  readonly atSec: number
  /** In a failover, partition or start-up window: not held to the convergence target. */
  readonly disturbed: boolean
  /** undefined: not converged before the next event. */
  readonly ms: number | undefined
  readonly refreshes: number | undefined
}

export interface SimResourceSummary {
  readonly resource: string
  readonly refreshMs: number
  /** Mean admitted ÷ capacity over ticks where demand ≥ capacity. */
  readonly utilisation: number
  /** The same, outside failover and partition windows. */
  readonly utilisationSteady: number
  /** Worst admitted ÷ capacity over any 1 s window. */
  readonly worst1s: number
  readonly worst1sSteady: number
  /** Most admitted beyond ∫capacity + Σburst over any interval outside failovers and partitions (≤ 0: bound held). */
  readonly excessOverBoundSteady: number
  readonly excessOverBound: number
  /** 1 s samples above capacity (by more than 1%), grouped in runs. */
  readonly overCapacityEpisodes: number
  readonly overCapacityPeak: number
  readonly jainMean: number
  readonly jainMin: number
  readonly convergence: readonly ConvergenceRecord[]
  /**
   * After each crash: seconds until admitted is back to 98% of min(capacity, demand) for good
   * (within the failover's disturbed window; 0 when it never fell below).
   */
  readonly catchUpSec: readonly number[]
  /**
   * After each crash: seconds until every client of the resource holds a lease the new
   * coordinator sent (undefined: not before the next crash or the end).
   */
  readonly releasedSec: readonly (number | undefined)[]
  /** Quota resources: each window's use. */
  readonly quota?: QuotaSummary | undefined
}

export interface TrackedClient {
  readonly id: string
  readonly resource: string
  readonly grants: number[]
  readonly ideals: number[]
}

export interface SimResult {
  readonly scenario: Scenario
  readonly rows: readonly SampleRow[]
  readonly tracked: readonly TrackedClient[]
  readonly summary: {
    readonly name: string
    readonly simulatedSec: number
    readonly wallMs: number
    readonly clients: number
    readonly messages: number
    /** Packets lost and resent. */
    readonly lost: number
    readonly crashes: number
    readonly resources: readonly SimResourceSummary[]
    readonly families: readonly FamilySummary[]
    readonly checks: readonly { name: string; ok: boolean; detail: string }[]
  }
}

/** One simulated client process: its demand curve and, while it runs, its real client. */
export interface SimClient {
  readonly id: string
  readonly resource: string
  readonly weight: number
  readonly failureMode: FailureMode
  readonly joinMs: number
  readonly leaveMs: number
  readonly curve: DemandCurve
  readonly seed: number
  client: SluiceClient | undefined
  handle: Resource | undefined
  /** A client of a keyed family: its handle while it runs, and its draw of key ranks. */
  family: KeyedFamily | undefined
  readonly draw: (() => number) | undefined
  demand: number
  carry: number
  /** Concurrency: slots held since the last tick. */
  held: number
  /** When the client last received a lease (-Infinity: never). */
  lastLeaseMs: number
}

/** What the run records of one resource, tick by tick. */
export interface ResourceTrack {
  readonly id: string
  readonly kind: ResourceKind
  readonly burst: number
  readonly refreshMs: number
  readonly surplus: Config['resources'][number]['surplus']
  readonly algorithm: Config['resources'][number]['algorithm']
  capacity: number
  readonly admitted: number[]
  readonly capacityPerTick: number[]
  readonly demandPerTick: number[]
  readonly deviation: number[]
  sampleEnforced: number
  sampleAdmitted: number
  sampleDemand: number
  idealVersion: number
  ideal: Map<string, number>
  /** Quota: the window rule, and what was asked and admitted in each window (by its number). */
  readonly quota?: {
    readonly spec: WindowSpec
    readonly windows: Map<number, QuotaWindowUse>
  }
}

/** What the clients asked for and admitted of a quota in one window, wall-clock bounds. */
export interface QuotaWindowUse {
  readonly index: number
  readonly startMs: number
  readonly endMs: number
  used: number
  asked: number
}

/** A quota's windows over a run. */
export interface QuotaSummary {
  readonly windows: readonly {
    readonly index: number
    /** The whole window lies inside the run, after the first start's learning: it is measured. */
    readonly whole: boolean
    readonly used: number
    readonly asked: number
    readonly capacity: number
  }[]
  /** The most used in a window ÷ capacity (≤ 1: the budget held in every window). */
  readonly worstUsed: number
  /**
   * The most budget left unused at a whole window's end whose demand exceeded it
   * (≥ 105% of capacity asked), ÷ capacity: what blocks stranded. 0 when no window qualifies.
   */
  readonly worstStranded: number
}
