import { allocate, wholeTokens, wholeUnits, type ClientDemand } from '../../allocation/index.js'
import { domainLimits, inKindUnits, kindTraits } from '../../../shared/index.js'
import { centralClientId } from './default-holders.js'
import type { Entry, ResourceState } from '../entry.js'
import { keepClose } from './headroom.js'
import { tenantOf } from './shape.js'

/**
 * Targets by weighted max-min: what is left beside what silent clients hold
 * (`reserved`) is allocated over `wants` (one per entry of `active`) by the
 * resource's algorithm, surplus rule and tenants, in the kind's units
 * (whole slots for a semaphore), and with `wholeTokens` a share that would
 * be a sliver below one token of burst goes whole to a few. A lease close
 * enough to its target stays (headroom tolerance). The coordinator's own part
 * (remote decisions) is served last, from what the processes leave.
 */
export function maxMinTargets(
  r: ResourceState,
  active: readonly Entry[],
  wants: readonly number[],
  reserved: number,
  options: {
    readonly wholeTokens: boolean
    /** The default split's weights (defaultWeights): its central part is no lower band there. */
    readonly weights?: readonly number[]
  },
): void {
  const s = r.settings
  const clients: ClientDemand[] = active.map((e, i) => ({
    id: e.client.key,
    wants: wants[i]!,
    weight: options.weights?.[i] ?? e.weight,
    // The coordinator's own part of a key (remote decisions) is its lowest band: it gets what the
    // processes asking for the key leave, never a part of what they use themselves. In the
    // default split it holds the part of the processes it decides for, at their weight.
    priority:
      e.client.clientId === centralClientId && options.weights === undefined
        ? -domainLimits.maxPriority
        : e.priority,
    tenant: tenantOf(r, e),
  }))
  // Slots are whole: what is left beside the reserved slots is shared in whole slots.
  const left = Math.max(0, s.capacity - reserved)
  const result = allocate({
    capacity: inKindUnits(s.kind, left),
    algorithm: s.algorithm,
    surplus: s.surplus,
    tenants: s.tenants,
    clients,
  })
  // Slots are whole: a semaphore cannot use half of one. A key's rate share admits nothing
  // below a token of its burst: with many holders, those slivers go whole to a few.
  const traits = kindTraits[s.kind]
  const grants = traits.wholeUnits
    ? wholeUnits(result.grants)
    : options.wholeTokens && traits.refills && s.burst > 0
      ? wholeTokens(result.grants, s.capacity / s.burst, {
          held: (i) => active[i]!.newest,
          wants: (i) => clients[i]!.wants,
        })
      : result.grants
  for (let i = 0; i < active.length; i++) active[i]!.target = grants[i]!
  const tolerance = s.headroomTolerance ?? 0
  if (tolerance > 0) keepClose(r, active, clients, tolerance, left)
}
