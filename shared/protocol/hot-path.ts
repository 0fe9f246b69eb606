import { domainLimits as L, resourceKinds } from '../domain.js'
import type {
  AckMessage,
  ClientMessage,
  DecideMessage,
  DecidedMessage,
  DemandMessage,
  LeaseMessage,
  ServerMessage,
} from './messages.js'

/**
 * A check of the messages sent all the time without zod, which allocates a
 * result, an issue list and a copy of every object it checks: at 10k clients
 * zod alone made about a third of the coordinator's garbage, and a remote
 * decision's two frames (`decide`, `decided`) are sent per request
 * (docs/benchmarks.md).
 *
 * It is a filter, not a second schema: it returns the parsed JSON as the
 * message only when every field is one the zod schema in messages.ts would
 * accept unchanged, and `undefined` for anything else (a hello, a release,
 * an unknown key, a bound crossed), which then goes through zod and gets
 * zod's error. A property test holds it to that: whatever it accepts, zod
 * accepts and decodes to an equal value (test/shared/protocol/hot-path.test.ts).
 */
export function acceptHotMessage(json: unknown): ClientMessage | undefined {
  if (!isRecord(json)) return undefined
  const type = json.type
  if (type === 'demand') return isDemand(json) ? (json as DemandMessage) : undefined
  if (type === 'ack') return isAck(json) ? (json as AckMessage) : undefined
  if (type === 'decide') return isDecide(json) ? (json as DecideMessage) : undefined
  return undefined
}

/**
 * The same filter for what a coordinator sends all the time: the answers to a `decide` (per
 * request), and lease batches (every round, to every holder; the coordinator's own part takes
 * one for every key it decides, each second). A lease of the common shape passes: a rate,
 * concurrency or key lease, a family's share without a plan, with or without its proof; a
 * quota's window, a handover (`handed`, `inherit`) or a plan is zod's to check.
 */
export function acceptHotServerMessage(json: unknown): ServerMessage | undefined {
  if (!isRecord(json)) return undefined
  if (json.type === 'decided') return isDecided(json) ? (json as DecidedMessage) : undefined
  if (json.type === 'lease') return isLeaseBatch(json) ? (json as LeaseMessage) : undefined
  return undefined
}

type Fields = Record<string, unknown>

function isRecord(value: unknown): value is Fields {
  return typeof value === 'object' && value !== null && !Array.isArray(value)
}

// The keys each strict object of messages.ts allows; any other key is zod's to refuse.
const demandKeys: ReadonlySet<string> = new Set(['type', 'resources', 'early', 'n', 'at'])
const entryKeys: ReadonlySet<string> = new Set(['resource', 'wants', 'weight', 'priority', 'usage'])
const usageKeys: ReadonlySet<string> = new Set([
  'windowMs',
  'admitted',
  'refused',
  'admittedCalls',
  'refusedCalls',
  'waiting',
  'inFlight',
  'peakInFlight',
])
const ackKeys: ReadonlySet<string> = new Set(['type', 'seq', 'resources'])
const decideKeys: ReadonlySet<string> = new Set(['type', 'asks'])
const decidedKeys: ReadonlySet<string> = new Set(['type', 'answers'])
const leaseBatchKeys: ReadonlySet<string> = new Set(['type', 'seq', 'leases', 'at'])
// A grant's keys of the common shape: `window`, `handed`, `inherit` and the like go to zod.
const grantKeys: ReadonlySet<string> = new Set([
  'resource',
  'kind',
  'capacity',
  'burst',
  'ttlMs',
  'refreshMs',
  'safeCapacity',
  'safeHoldMs',
  'proof',
  'limit',
  'full',
  'fill',
  'fillWhole',
  'handOn',
  'rising',
  'toDefault',
  'family',
])
const proofKeys: ReadonlySet<string> = new Set([
  'capacity',
  'fallback',
  'untilMs',
  'fallbackUntilMs',
  'issuedMs',
  'gen',
  'mac',
])
const limitKeys: ReadonlySet<string> = new Set(['capacity', 'burst'])
// A family's share without a plan (a plan's keys are any strings: zod's).
const familyKeys: ReadonlySet<string> = new Set(['kind', 'capacity', 'burst'])
const kinds: ReadonlySet<unknown> = new Set(resourceKinds)

/** Whether every own key of `o` (a JSON.parse result: all keys are own) is in `allowed`. */
function hasOnlyKeys(o: Fields, allowed: ReadonlySet<string>): boolean {
  for (const key in o) if (!allowed.has(key)) return false
  return true
}

// eslint-disable-next-line no-control-regex
const printable = /^[^\u0000-\u001f\u007f-\u009f]+$/u

function isResourceId(value: unknown): boolean {
  return (
    typeof value === 'string' &&
    value.length >= 1 &&
    value.length <= L.maxIdLength &&
    printable.test(value)
  )
}

function isNumberIn(value: unknown, min: number, max: number): boolean {
  return typeof value === 'number' && value >= min && value <= max
}

function isIntIn(value: unknown, min: number, max: number): boolean {
  return isNumberIn(value, min, max) && Number.isSafeInteger(value)
}

function isQuantity(value: unknown): boolean {
  return isNumberIn(value, 0, L.maxQuantity)
}

function isDemand(m: Fields): boolean {
  if (!hasOnlyKeys(m, demandKeys)) return false
  if (m.early !== undefined && typeof m.early !== 'boolean') return false
  if (m.n !== undefined && !isIntIn(m.n, 1, Number.MAX_SAFE_INTEGER)) return false
  if (m.at !== undefined && !isNumberIn(m.at, 0, Number.MAX_SAFE_INTEGER)) return false
  const resources = m.resources
  if (!Array.isArray(resources) || resources.length > L.maxEntries) return false
  for (let i = 0; i < resources.length; i++) if (!isDemandEntry(resources[i])) return false
  return true
}

function isDemandEntry(e: unknown): boolean {
  if (!isRecord(e)) return false
  if (!hasOnlyKeys(e, entryKeys)) return false
  return (
    isResourceId(e.resource) &&
    isQuantity(e.wants) &&
    (e.weight === undefined || isNumberIn(e.weight, L.minWeight, L.maxWeight)) &&
    (e.priority === undefined || isIntIn(e.priority, -L.maxPriority, L.maxPriority)) &&
    (e.usage === undefined || isUsage(e.usage))
  )
}

function isUsage(u: unknown): boolean {
  if (!isRecord(u)) return false
  if (!hasOnlyKeys(u, usageKeys)) return false
  return (
    isIntIn(u.windowMs, 1, 3_600_000) &&
    isQuantity(u.admitted) &&
    isQuantity(u.refused) &&
    isIntIn(u.admittedCalls, 0, L.maxQuantity) &&
    isIntIn(u.refusedCalls, 0, L.maxQuantity) &&
    isIntIn(u.waiting, 0, L.maxQuantity) &&
    (u.inFlight === undefined || isQuantity(u.inFlight)) &&
    (u.peakInFlight === undefined || isQuantity(u.peakInFlight))
  )
}

function isAck(m: Fields): boolean {
  if (!hasOnlyKeys(m, ackKeys)) return false
  if (!isIntIn(m.seq, 1, Number.MAX_SAFE_INTEGER)) return false
  const resources = m.resources
  if (resources === undefined) return true
  if (!Array.isArray(resources) || resources.length < 1 || resources.length > L.maxEntries)
    return false
  for (let i = 0; i < resources.length; i++) if (!isResourceId(resources[i])) return false
  return true
}

function isDecide(m: Fields): boolean {
  if (!hasOnlyKeys(m, decideKeys)) return false
  const asks = m.asks
  if (!Array.isArray(asks) || asks.length < 1 || asks.length > L.maxEntries) return false
  for (let i = 0; i < asks.length; i++) {
    const ask: unknown = asks[i]
    if (
      !Array.isArray(ask) ||
      ask.length !== 3 ||
      !isIntIn(ask[0], 0, Number.MAX_SAFE_INTEGER) ||
      !isResourceId(ask[1]) ||
      !isQuantity(ask[2])
    )
      return false
  }
  return true
}

function isDecided(m: Fields): boolean {
  if (!hasOnlyKeys(m, decidedKeys)) return false
  const answers = m.answers
  if (!Array.isArray(answers) || answers.length > L.maxEntries) return false
  for (let i = 0; i < answers.length; i++) {
    const answer: unknown = answers[i]
    if (!Array.isArray(answer)) return false
    const admitted: unknown = answer[1]
    if (
      !(
        (answer.length === 3 && (admitted === 0 || admitted === 1)) ||
        // An admitted check of a keyed quota adds its window.
        (answer.length === 4 && admitted === 1 && isIntIn(answer[3], -1e12, 1e12))
      ) ||
      !isIntIn(answer[0], 0, Number.MAX_SAFE_INTEGER) ||
      !isIntIn(answer[2], -1, Number.MAX_SAFE_INTEGER)
    )
      return false
  }
  return true
}

function isLeaseBatch(m: Fields): boolean {
  if (!hasOnlyKeys(m, leaseBatchKeys)) return false
  if (!isIntIn(m.seq, 1, Number.MAX_SAFE_INTEGER)) return false
  if (m.at !== undefined && !isIntIn(m.at, 0, Number.MAX_SAFE_INTEGER)) return false
  const leases = m.leases
  if (!Array.isArray(leases)) return false
  for (let i = 0; i < leases.length; i++) if (!isGrant(leases[i])) return false
  return true
}

function isGrant(g: unknown): boolean {
  if (!isRecord(g) || !hasOnlyKeys(g, grantKeys)) return false
  return (
    isResourceId(g.resource) &&
    kinds.has(g.kind) &&
    isQuantity(g.capacity) &&
    isQuantity(g.burst) &&
    isIntIn(g.ttlMs, 0, Number.MAX_SAFE_INTEGER) &&
    isIntIn(g.refreshMs, 1, Number.MAX_SAFE_INTEGER) &&
    isQuantity(g.safeCapacity) &&
    isIntIn(g.safeHoldMs, 0, Number.MAX_SAFE_INTEGER) &&
    (g.proof === undefined || isProof(g.proof)) &&
    (g.limit === undefined || isLimits(g.limit, limitKeys)) &&
    (g.full === undefined || g.full === true) &&
    (g.fill === undefined || isQuantity(g.fill)) &&
    (g.fillWhole === undefined || g.fillWhole === true) &&
    (g.handOn === undefined || g.handOn === true) &&
    (g.rising === undefined || g.rising === true) &&
    (g.toDefault === undefined || g.toDefault === true) &&
    (g.family === undefined || (isLimits(g.family, familyKeys) && kinds.has(g.family.kind)))
  )
}

/** `{ capacity, burst }` (and whatever else `allowed` lets `o` have, checked by the caller). */
function isLimits(o: unknown, allowed: ReadonlySet<string>): o is Fields {
  return isRecord(o) && hasOnlyKeys(o, allowed) && isQuantity(o.capacity) && isQuantity(o.burst)
}

function isProof(p: unknown): boolean {
  if (!isRecord(p) || !hasOnlyKeys(p, proofKeys)) return false
  return (
    isQuantity(p.capacity) &&
    isQuantity(p.fallback) &&
    isIntIn(p.untilMs, 0, Number.MAX_SAFE_INTEGER) &&
    isIntIn(p.fallbackUntilMs, 0, Number.MAX_SAFE_INTEGER) &&
    isIntIn(p.issuedMs, 0, Number.MAX_SAFE_INTEGER) &&
    isIntIn(p.gen, 0, Number.MAX_SAFE_INTEGER) &&
    typeof p.mac === 'string' &&
    p.mac.length >= 1 &&
    p.mac.length <= 128
  )
}
