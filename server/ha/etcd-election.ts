import { EventEmitter } from 'node:events'
import { Etcd3, type Lease, type Namespace, type Watcher } from 'etcd3'
import type { Logger } from 'pino'
import { backoffDelayMs, type Clock, type Timer } from '../../shared/index.js'
import type { LeaderElection } from './election.js'
import { EtcdLedger, type Fence } from './etcd-ledger.js'

export interface EtcdElectionOptions {
  /** etcd client URLs, e.g. http://127.0.0.1:2379 */
  readonly endpoints: readonly string[]
  /** Election name; replicas with the same name compete. */
  readonly name: string
  /** etcd lease TTL, seconds (etcd's minimum is 2 with its default timings). */
  readonly ttlSec: number
  readonly advertiseUrl: string
  readonly clock: Clock
  readonly logger: Logger
  /** Uniform [0, 1) for retry jitter. */
  readonly random?: (() => number) | undefined
}

/**
 * Leader election through etcd, by the recipe of etcd's own
 * `concurrency.Election`: each replica puts a key under the election prefix,
 * bound to an etcd lease it keeps alive; the oldest key leads.
 *
 * Safety does not rest on etcd3's `lost` event, which fires only two TTLs
 * after the last keep-alive: by then a successor may have led for a whole
 * TTL. Instead this class tracks when each keep-alive was *sent* and its
 * answer; etcd counts the TTL from when it handles the request, so the lease
 * surely lives until `sent + TTL`. The replica steps down `marginMs` before
 * that bound unless a newer keep-alive extends it.
 */
export class EtcdElection extends EventEmitter implements LeaderElection {
  readonly advertiseUrl: string
  readonly #options: EtcdElectionOptions
  readonly #client: Etcd3
  readonly #ns: Namespace
  readonly #random: () => number
  #lease: Lease | undefined
  #watcher: Watcher | undefined
  #leaderUrl: string | undefined
  #reads = 0
  #leading = false
  /** Our election key and the revision that created it, while we lead: what ledger writes check. */
  #fence: Fence | undefined
  #validUntilMs = -Infinity
  #watchdog: Timer | undefined
  #retry: Timer | undefined
  #attempt = 0
  #generation = 0
  #closed = false

  constructor(options: EtcdElectionOptions) {
    super()
    this.#options = options
    this.advertiseUrl = options.advertiseUrl
    this.#random = options.random ?? Math.random
    this.#client = new Etcd3({ hosts: [...options.endpoints], dialTimeout: 2_000 })
    this.#ns = this.#client.namespace(`election/${options.name}/`)
  }

  /**
   * The ledger of commitments on this etcd, under `ledger/<name>/`: its
   * writes succeed only while this replica holds its election key.
   */
  ledger(): EtcdLedger {
    return new EtcdLedger(this.#client, this.#options.name, () =>
      this.#leading ? this.#fence : undefined,
    )
  }

  /** Time before the lease's sure end at which a leader steps down. */
  get marginMs(): number {
    return Math.max(250, (this.#options.ttlSec * 1000) / 6)
  }

  get leading(): boolean {
    return this.#leading
  }

  /** The step-down deadline: the surest end of our etcd lease, less the margin. */
  leadingUntilMs(): number {
    return this.#leading ? this.#deadlineMs() : -Infinity
  }

  start(): void {
    this.#campaign()
    this.#observe()
  }

  async close(): Promise<void> {
    if (this.#closed) return
    this.#closed = true
    this.#retry?.cancel()
    this.#watchdog?.cancel()
    if (this.#leading) this.#depose('closing')
    const lease = this.#lease
    this.#lease = undefined
    // Revoking deletes our key now, so a successor is elected without waiting out the TTL.
    await lease?.revoke().catch(() => undefined)
    await this.#watcher?.cancel().catch(() => undefined)
    this.#client.close()
  }

  // ---- campaign ----

  #campaign(): void {
    if (this.#closed) return
    const generation = ++this.#generation
    const { clock, ttlSec, logger } = this.#options
    const sentMs = clock.now()
    const lease = this.#client.lease(ttlSec)
    this.#lease = lease
    this.#validUntilMs = -Infinity
    let unanswered: number[] = []
    lease.on('keepaliveEstablished', () => (unanswered = []))
    lease.on('keepaliveFired', () => unanswered.push(clock.now()))
    lease.on('keepaliveFailed', () => (unanswered = []))
    lease.on('keepaliveSucceeded', (res: { TTL: string }) => {
      const firedMs = unanswered.shift()
      if (firedMs === undefined) return
      this.#extend(firedMs + Number(res.TTL) * 1000)
    })
    lease.on('lost', (error: Error) => this.#fail(generation, `etcd lease lost: ${error.message}`))

    this.#runCampaign(lease, sentMs, generation).catch((error: unknown) =>
      this.#fail(generation, `campaign failed: ${(error as Error).message}`),
    )
    logger.debug({ generation }, 'campaigning')
  }

  async #runCampaign(lease: Lease, sentMs: number, generation: number): Promise<void> {
    const id = await lease.grant()
    if (generation !== this.#generation) return
    this.#extend(sentMs + this.#options.ttlSec * 1000)
    const put = await this.#ns
      .if(id, 'Create', '==', 0)
      .then(this.#ns.put(id).value(this.advertiseUrl).lease(id))
      .else(this.#ns.get(id))
      .commit()
    const myRevision = put.succeeded
      ? BigInt(put.header.revision)
      : BigInt(put.responses[0]!.response_range.kvs[0]!.create_revision)
    // Wait until every older candidate's key is gone.
    for (;;) {
      if (generation !== this.#generation) return
      const older = await this.#ns
        .getAll()
        .maxCreateRevision((myRevision - 1n).toString())
        .sort('Create', 'Descend')
        .limit(1)
        .exec()
      const first = older.kvs[0]
      if (first === undefined) break
      const watcher = await this.#ns
        .watch()
        .key(first.key)
        .startRevision((BigInt(older.header.revision) + 1n).toString())
        .only('delete')
        .create()
      try {
        await new Promise<void>((resolve, reject) => {
          watcher.once('delete', () => resolve())
          watcher.once('error', reject)
          // A lost lease ends the wait too.
          lease.once('lost', () => resolve())
        })
      } finally {
        await watcher.cancel()
      }
    }
    if (generation !== this.#generation) return
    if (this.#options.clock.now() >= this.#deadlineMs()) {
      throw new Error('elected, but the lease may already have lapsed')
    }
    this.#fence = {
      key: `election/${this.#options.name}/${id}`,
      createRevision: myRevision.toString(),
    }
    this.#leading = true
    this.#attempt = 0
    this.#armWatchdog()
    this.#options.logger.info({ url: this.advertiseUrl }, 'won the election')
    this.emit('elected')
  }

  #extend(untilMs: number): void {
    if (untilMs <= this.#validUntilMs) return
    this.#validUntilMs = untilMs
    if (this.#leading) this.#armWatchdog()
  }

  #deadlineMs(): number {
    return this.#validUntilMs - this.marginMs
  }

  #armWatchdog(): void {
    this.#watchdog?.cancel()
    const generation = this.#generation
    const delayMs = Math.max(0, this.#deadlineMs() - this.#options.clock.now())
    this.#watchdog = this.#options.clock.setTimeout(() => {
      this.#watchdog = undefined
      this.#fail(generation, 'no keep-alive answered in time; the etcd lease may lapse')
    }, delayMs)
  }

  /** The campaign of `generation` is over: step down if leading, then campaign again after a jittered delay. */
  #fail(generation: number, reason: string): void {
    if (generation !== this.#generation || this.#closed) return
    this.#generation++
    this.#watchdog?.cancel()
    this.#watchdog = undefined
    if (this.#leading) this.#depose(reason)
    const lease = this.#lease
    this.#lease = undefined
    // Best effort: a lease we gave up must not keep our key (and leadership) alive.
    lease?.revoke().catch(() => undefined)
    const delayMs = backoffDelayMs(this.#attempt++, 200, 2_000, this.#random)
    this.#options.logger.warn({ reason, retryInMs: Math.round(delayMs) }, 'campaign ended')
    this.#retry = this.#options.clock.setTimeout(() => {
      this.#retry = undefined
      this.#campaign()
    }, delayMs)
  }

  #depose(reason: string): void {
    this.#leading = false
    this.#fence = undefined
    this.emit('deposed', reason)
  }

  // ---- observation ----

  // Not etcd3's ElectionObserver: when several candidates' puts arrive in one watch response it
  // takes the last one, not the oldest, and names a follower as leader. Here every change under
  // the prefix re-reads the oldest key, which is the leader by definition.
  #observe(): void {
    if (this.#closed) return
    this.#ns
      .watch()
      .prefix('')
      .create()
      .then((watcher) => {
        if (this.#closed) return void watcher.cancel()
        this.#watcher = watcher
        const reread = (): void => this.#readLeader()
        watcher.on('data', reread)
        watcher.on('connected', reread)
        watcher.on('disconnected', () => this.#setLeader(undefined))
        watcher.on('error', (error: Error) => {
          void watcher.cancel()
          this.#reobserve(error)
        })
        reread()
      })
      .catch((error: unknown) => this.#reobserve(error as Error))
  }

  #readLeader(): void {
    const read = ++this.#reads
    this.#ns
      .getAll()
      .sort('Create', 'Ascend')
      .limit(1)
      .exec()
      .then((res) => {
        // Answers may overtake each other; only the newest read counts.
        if (read === this.#reads && !this.#closed) this.#setLeader(res.kvs[0]?.value.toString())
      })
      .catch((error: unknown) =>
        this.#options.logger.debug({ err: error }, 'reading the leader failed'),
      )
  }

  #setLeader(url: string | undefined): void {
    if (url === this.#leaderUrl) return
    this.#leaderUrl = url
    this.#options.logger.debug({ leader: url }, 'leader observed')
    this.emit('leader', url)
  }

  #reobserve(error: Error): void {
    this.#watcher = undefined
    if (this.#closed) return
    this.#setLeader(undefined)
    const delayMs = backoffDelayMs(1, 200, 2_000, this.#random)
    this.#options.logger.warn({ err: error, retryInMs: Math.round(delayMs) }, 'observing failed')
    this.#options.clock.setTimeout(() => this.#observe(), delayMs)
  }
}
