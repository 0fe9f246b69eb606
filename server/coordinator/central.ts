import { EventEmitter } from 'node:events'
import type { Logger } from 'pino'
import { SluiceClient, type ClientSocket, type KeyedFamily } from '../../client/index.js'
import {
  closeCodeOf,
  decodeClientMessage,
  encodeMessage,
  formatError,
  keyOfId,
  keyProblem,
  type Clock,
  type ClientMessage,
  type DecideMessage,
  type DecidedMessage,
  type ErrorCode,
  type ServerMessage,
} from '../../shared/index.js'
import type { FamilySettings } from '../config/index.js'
import { centralClientId } from '../pool/index.js'
import type { SessionPort } from './session-port.js'
import { SpendReserve, type ReserveHost } from './spend-reserve.js'

/** What the central part needs of the coordinator: its door for messages, and what a key is. */
export interface CentralHost {
  receive(session: SessionPort, msg: ClientMessage): void
  disconnected(session: SessionPort): void
  /** The keyed family `id` is a key of (its key role), undefined when none. */
  familyOfKey(id: string): FamilySettings | undefined
  /** The keyed family whose own resource `id` is (`<prefix>/*`), undefined when none. */
  familyOf(id: string): FamilySettings | undefined
  /** Whether `tenant` may use `id` (the config's tenants). */
  allows(tenant: string | undefined, id: string): boolean
  /** A keyed quota's spending, written ahead of the answers (spend-reserve.ts). */
  readonly reserve: ReserveHost
  /**
   * What the pool means `tenant`'s central part to hold of `resourceId` (a family's share, or a
   * key's rate on its own): above what it holds, a rise is coming (pool/queries.ts `meantFor`).
   */
  meantFor(tenant: string | undefined, resourceId: string): number
}

/**
 * Keys the central part of a family tracks at once (a process's default is 50,000): a key it
 * holds nothing of is forgotten for a new one, and a flood of new keys asked of it walks and
 * reports this many at most each period.
 */
const centralMaxKeys = 10_000

/**
 * How long a remote check of a keyed quota's key the part holds nothing of waits for the key's
 * own lease before it is refused: the part's early report (a fifth of a refresh period, 200 ms
 * by default), the coordinator's round of the key and the lease back, in this process.
 */
export const keyLeaseWaitMs = 500

/** What became of a remote decision, as `sluice_remote_decisions_total` counts it. */
export const remoteOutcomes = ['admitted', 'refused', 'over_budget', 'undecidable'] as const
export type RemoteOutcome = (typeof remoteOutcomes)[number]
const noOutcomes: Readonly<Record<RemoteOutcome, number>> = Object.freeze({
  admitted: 0,
  refused: 0,
  over_budget: 0,
  undecidable: 0,
})

/**
 * The coordinator's own part of every key: remote decisions (`decide`) are
 * taken against it, as one central limiter would take them.
 *
 * It is a client like any other: a `SluiceClient` per tenant, connected to
 * this coordinator through an in-process socket, holding a share of each
 * family it is asked of and, for a key asked of it, a lease of its own by
 * max-min over what it is asked, as any process gets one. So what it admits
 * is bounded exactly as every process's part is (Σ leases ≤ capacity, a moved
 * share brings no burst), and no bound had to be written again for it. A key
 * asked for thinly at many processes (each holding nothing of it) is asked
 * of the central part alone, which then holds the key's capacity and admits
 * what a central limiter would.
 *
 * It lives on the leader only: a step-down closes it (its leases lapse as any
 * closed client's), and a new leader makes its own on the first ask.
 */
export class Central {
  readonly #host: CentralHost
  readonly #clock: Clock
  readonly #log: Logger
  /** The central client of each tenant ('' without one). */
  readonly #clients = new Map<string, SluiceClient>()
  /** Asks decided here since the start, and of those admitted. */
  asked = 0
  admitted = 0

  readonly #count: (family: string, outcome: RemoteOutcome, n: number) => void
  /** What a keyed quota's answers admitted, in the ledger before they leave. */
  readonly #reserve: SpendReserve

  constructor(
    host: CentralHost,
    clock: Clock,
    log: Logger,
    count: (family: string, outcome: RemoteOutcome, n: number) => void = () => undefined,
  ) {
    this.#host = host
    this.#clock = clock
    this.#log = log
    this.#count = count
    this.#reserve = new SpendReserve(host.reserve)
  }

  /** A session's asks: each decided against the central part of its key, answered in one frame. */
  decide(session: SessionPort, msg: DecideMessage): void {
    const tenant = session.tenant
    const answers: DecidedMessage['answers'] = []
    let waits = false
    // Counted once a frame for each family and outcome (a counter's inc is not free).
    const counts = new Map<string, Record<RemoteOutcome, number>>()
    const count = (family: string, outcome: RemoteOutcome): void => {
      let c = counts.get(family)
      if (c === undefined) counts.set(family, (c = { ...noOutcomes }))
      c[outcome]++
    }
    for (const [n, resource, cost] of msg.asks) {
      const settings = this.#askable(tenant, resource)
      // Not a key that may be decided here: refused, not by waiting.
      if (settings === undefined) {
        answers.push([n, 0, -1])
        count(this.#labelOf(resource), 'undecidable')
        continue
      }
      this.asked += cost
      const family = this.#partOf(tenant, settings)
      const key = keyOfId(family.prefix, resource)!
      // Its first ask of a family makes the central part's holder of it. A rate family's asks
      // until its first share comes (a round trip in the process, and a round) wait for that
      // share, `keyLeaseWaitMs` at most, as a keyed quota's key nobody holds waits for its lease
      // (a keyed quota's part: as any key it holds nothing of, below). Not even tried first: a
      // refusal would ask for the key on its own (an early report), and the key, hot, would
      // start at the part from its lease of 0.
      // The same while the pool means the part to hold some of a key it holds nothing of now: a
      // family just crowded (a sixth gateway joined five) moves every process's default share to
      // the part, granted once the falls are acknowledged, then a lease on its way here, and the
      // joiner's first checks, asked meanwhile, were refused (#41: keys of rank 273, 724 and 292
      // in the joiner's first 70 ms, a central limiter admitting them).
      const first =
        settings.keyKind === 'rate' &&
        (family.awaitsFirstShare(key, keyLeaseWaitMs) ||
          this.#riseComing(tenant, family, key, resource))
      const admitted = first ? undefined : this.#take(tenant, family, key, n, cost)
      if (admitted !== undefined) {
        answers.push(admitted)
        count(family.familyId, 'admitted')
        if (this.#tookWaits) waits = true
      } else if (
        (first || family.awaitsOwnLease(key)) &&
        this.#later(session, family, key, n, cost)
      ) {
        continue
      } else {
        answers.push(refusal(family, key, n, cost))
        count(family.familyId, 'refused')
      }
    }
    this.#reserve.settle(waits, (ok) =>
      // Every ask of the frame waits for a key's lease (`#later`): nothing to answer now.
      answers.length === 0
        ? undefined
        : session.send({
            type: 'decided',
            // Not written (the ledger failed): refused, the units stay counted here.
            answers: ok ? answers : answers.map(([n, admitted, ms]) => [n, 0, admitted ? -1 : ms]),
          }),
    )
    for (const [family, c] of counts)
      for (const outcome of remoteOutcomes)
        if (c[outcome] > 0) this.#count(family, outcome, c[outcome])
  }

  /**
   * Whether the part holds nothing of `key` while the pool means it to hold some: of the key on
   * its own (leased to the part, the lease not here yet), or of the family's share above what
   * the part holds of it.
   */
  #riseComing(
    tenant: string | undefined,
    family: KeyedFamily,
    key: string,
    resource: string,
  ): boolean {
    const lease = family.leaseOf(key)
    if (lease.capacity > 0) return false
    if (this.#host.meantFor(tenant, resource) > 0) return true
    // A key leased on its own here goes by its own lease alone, not the family's share.
    if (lease.source === 'key') return false
    return this.#host.meantFor(tenant, family.familyId) > (family.lease?.capacity ?? 0) + 1e-9
  }

  /** Whether the last admission `#take` made must wait for a write before its answer leaves. */
  #tookWaits = false

  /**
   * `cost` of `key` taken from the part now: the answer admitting it, or undefined when the part
   * cannot. A keyed quota's admission leaves once the ledger holds it (spend-reserve.ts):
   * `#tookWaits` says whether it must wait for a write.
   */
  #take(
    tenant: string | undefined,
    family: KeyedFamily,
    key: string,
    n: number,
    cost: number,
  ): DecidedMessage['answers'][number] | undefined {
    const quota = family.windowSec !== undefined
    if (quota) this.#reserve.before(family, key)
    if (!family.tryAcquire(key, cost)) return undefined
    this.admitted += cost
    this.#tookWaits = quota && this.#reserve.admitted(tenant, family, key, this.#clock.now())
    // What the key has left after it, as the part knows it (the HTTP edge's `remaining`): a
    // gateway that holds nothing of the key has nothing of its own to say (docs/protocol.md).
    const left = family.clusterRemaining(key)
    const window = family.leaseOf(key).window
    return window === undefined ? [n, 1, left] : [n, 1, left, window]
  }

  /**
   * A keyed quota's key the part holds nothing of, and no lease of its own: what no process holds
   * of it (the room kept for one process more; after a rolling deploy, 9 of a customer's 100 at
   * once, #41) may be leased to the part, and its refusal just asked for the key. The check waits
   * for that lease (`keyLeaseWaitMs` at most), then is decided as any, in a frame of its own.
   * False when it may not wait (too many wait): refused now.
   */
  #later(session: SessionPort, family: KeyedFamily, key: string, n: number, cost: number): boolean {
    const waiting = family.waitForKeyLease(key, keyLeaseWaitMs)
    if (waiting === undefined) return false
    void waiting.then(() => {
      const admitted = this.#take(session.tenant, family, key, n, cost)
      const answer = admitted ?? refusal(family, key, n, cost)
      this.#count(family.familyId, admitted === undefined ? 'refused' : 'admitted', 1)
      this.#reserve.settle(admitted !== undefined && this.#tookWaits, (ok) =>
        session.send({
          type: 'decided',
          answers: ok ? [answer] : [[n, 0, answer[1] === 1 ? -1 : answer[2]]],
        }),
      )
    })
    return true
  }

  /**
   * A session's report says it asks the coordinator what its part of `familyId` cannot decide:
   * the central part holds the family for its tenant from now on (its first ask would make it
   * anyway), so in a crowded family it can take that process's default share at once
   * (server/pool/shapes/default-holders.ts) rather than after a first refusal.
   */
  holdFor(session: SessionPort, familyId: string): void {
    // Only a family's own id can be one (`<prefix>/*`): anything else is not looked up.
    if (!familyId.endsWith('/*')) return
    const family = this.#host.familyOf(familyId)
    if (family === undefined || family.keyKind === 'concurrency') return
    if (!this.#host.allows(session.tenant, familyId)) return
    this.#clientFor(session.tenant).keyed(family.prefix, { maxKeys: centralMaxKeys })
  }

  /** Every ask of `msg` refused at once, to be asked again in `retryAfterMs` (a budget spent). */
  refuse(session: SessionPort, msg: DecideMessage, retryAfterMs: number): void {
    const ms = Number.isFinite(retryAfterMs) ? Math.max(1, Math.ceil(retryAfterMs)) : -1
    // Counted under the first ask's family, once a frame: refusing must cost next to nothing
    // (a flood past the budget is answered, not looked up key by key).
    this.#count(this.#labelOf(msg.asks[0]![1]), 'over_budget', msg.asks.length)
    session.send({
      type: 'decided',
      answers: msg.asks.map(([n]): DecidedMessage['answers'][number] => [n, 0, ms]),
    })
  }

  /**
   * A key's family as a metric's label: a keyed family of the config (`<prefix>/*`), or ''
   * for anything else a client sends (one series, whatever it sends: never a label of its own).
   */
  #labelOf(resource: string): string {
    return this.#host.familyOfKey(resource)?.familyId ?? ''
  }

  /** The settings of `resource`'s family, when `tenant` may ask the coordinator for it; else undefined. */
  #askable(tenant: string | undefined, resource: string): FamilySettings | undefined {
    // The family alone, not the key's settings: a key's are made (and cached) only once it is
    // leased, not per ask of a new key.
    const family = this.#host.familyOfKey(resource)
    if (family === undefined) return undefined
    // A slot is released where it was taken: concurrency is never decided remotely.
    if (family.keyKind === 'concurrency') return undefined
    if (!this.#host.allows(tenant, resource)) return undefined
    const key = keyOfId(family.prefix, resource)
    if (key === undefined || keyProblem(family.prefix, key) !== undefined) return undefined
    return family
  }

  /** The central part's family `settings`, for `tenant` (made at its first ask). */
  #partOf(tenant: string | undefined, settings: FamilySettings): KeyedFamily {
    return this.#clientFor(tenant).keyed(settings.prefix, { maxKeys: centralMaxKeys })
  }

  #clientFor(tenant: string | undefined): SluiceClient {
    const name = tenant ?? ''
    let client = this.#clients.get(name)
    if (client !== undefined && client.failure === undefined) return client
    client = new SluiceClient({
      url: 'ws://127.0.0.1/v1/connect',
      clientId: centralClientId,
      name: 'the coordinator (remote decisions)',
      clock: this.#clock,
      socketFactory: () => new InProcessSocket(this.#host, tenant),
    })
    // Stopped for good (a new part is made at the next ask), or one message refused (the part
    // goes on): every `error` event had said "stopped", a refused report too.
    client.on('error', (error) =>
      client.failure === undefined
        ? this.#log.warn({ tenant, err: error }, 'remote decisions: the central part was refused')
        : this.#log.warn({ tenant, err: error }, 'remote decisions: the central part stopped'),
    )
    this.#clients.set(name, client)
    return client
  }

  /** The central parts close (a step-down, a shutdown): their leases lapse as a closed client's. */
  closeAll(): void {
    for (const client of this.#clients.values()) void client.close()
    this.#clients.clear()
  }
}

/** A refused ask's answer: when asking again may succeed at the part (-1: not by waiting). */
function refusal(
  family: KeyedFamily,
  key: string,
  n: number,
  cost: number,
): DecidedMessage['answers'][number] {
  const ms = family.msUntil(key, cost)
  return [n, 0, Number.isFinite(ms) ? Math.ceil(ms) : -1]
}

/**
 * The central client's end of its in-process connection: what `SluiceClient`
 * uses of a WebSocket. Frames go through the coordinator's one door
 * (`receive`) encoded and decoded as any, each in a microtask of its own, in
 * order, so no message is handled inside another's.
 */
class InProcessSocket extends EventEmitter implements ClientSocket {
  readyState = 0
  readonly #session: InProcessSession

  constructor(host: CentralHost, tenant: string | undefined) {
    super()
    this.#session = new InProcessSession(host, this, tenant)
    queueMicrotask(() => {
      if (this.readyState !== 0) return
      this.readyState = 1
      this.emit('open')
    })
  }

  send(data: string): void {
    if (this.readyState !== 1) return
    queueMicrotask(() => this.#session.receive(data))
  }

  close(code = 1000): void {
    if (this.readyState >= 2) return
    this.readyState = 2
    queueMicrotask(() => {
      this.#session.peerClosed()
      this.ended(code)
    })
  }

  terminate(): void {
    this.close(1006)
  }

  ping(): void {
    queueMicrotask(() => {
      if (this.readyState === 1) this.emit('pong')
    })
  }

  ended(code: number): void {
    if (this.readyState === 3) return
    this.readyState = 3
    this.emit('close', code)
  }
}

/** The coordinator's end of the central client's connection: a session trusted as its tenant's. */
class InProcessSession implements SessionPort {
  clientId: string | undefined = undefined
  tenant: string | undefined = undefined
  readonly upgradeToken = undefined
  readonly remoteAddress = undefined
  readonly internal: { readonly tenant: string | undefined }
  readonly #host: CentralHost
  readonly #socket: InProcessSocket
  #dead = false

  constructor(host: CentralHost, socket: InProcessSocket, tenant: string | undefined) {
    this.#host = host
    this.#socket = socket
    this.internal = { tenant }
  }

  send(message: ServerMessage): void {
    if (this.#dead) return
    const text = encodeMessage(message)
    const socket = this.#socket
    queueMicrotask(() => {
      if (socket.readyState === 1) socket.emit('message', text)
    })
  }

  fail(code: ErrorCode, detail: string): void {
    if (this.#dead) return
    this.send({ type: 'error', code, message: formatError(code, detail) })
    this.#dead = true
    const socket = this.#socket
    queueMicrotask(() => socket.ended(closeCodeOf(code)))
  }

  receive(text: string): void {
    if (this.#dead) return
    const decoded = decodeClientMessage(text)
    if (!decoded.ok) return this.fail(decoded.code, decoded.detail)
    this.#host.receive(this, decoded.message)
  }

  peerClosed(): void {
    if (this.#dead) return
    this.#dead = true
    this.#host.disconnected(this)
  }
}
