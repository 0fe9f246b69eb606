import type { Logger } from 'pino'
import type { Clock } from '../../shared/index.js'
import type { HaConfig } from '../config/index.js'
import type { Coordinator } from '../coordinator/index.js'
import type { LeaderElection } from '../ha/index.js'
import type { Ledger, LedgerEntry } from '../ledger/index.js'
import type { CoordinatorEventEmitter } from './events.js'

export interface ElectionContext {
  readonly coordinator: Coordinator
  readonly clock: Clock
  readonly logger: Logger
  readonly events: CoordinatorEventEmitter
  readonly advertiseUrl: string
}

/**
 * The election this coordinator takes part in: the embedder's, or etcd's
 * (`server.ha`), whose replicas keep their ledger in etcd, written in
 * transactions fenced by the election key (unless `keepLedger` is false).
 * etcd's client (and its gRPC stack, about a quarter of a second of imports)
 * is loaded only here, when `server.ha` asks for it: a coordinator without
 * etcd starts, and listens, without it.
 */
export async function makeElection(
  ctx: ElectionContext,
  ha: HaConfig | undefined,
  custom: ((advertiseUrl: string) => LeaderElection) | undefined,
  keepLedger: boolean,
): Promise<{ election: LeaderElection | undefined; ledger: Ledger | undefined }> {
  if (custom !== undefined) return { election: custom(ctx.advertiseUrl), ledger: undefined }
  if (ha === undefined) return { election: undefined, ledger: undefined }
  const { EtcdElection } = await import('../ha/etcd-election.js')
  const election = new EtcdElection({
    endpoints: ha.etcd,
    name: ha.name,
    ttlSec: ha.ttlSec,
    advertiseUrl: ctx.advertiseUrl,
    clock: ctx.clock,
    logger: ctx.logger,
  })
  if (!keepLedger) return { election, ledger: undefined }
  const ledger = election.ledger()
  ctx.coordinator.attachLedger(ledger, undefined)
  return { election, ledger }
}

/**
 * Wires an election to the coordinator's roles and starts it: fenced by the
 * election's lease; elected, it resumes from what the last leader wrote (a
 * ledger that cannot be read means learning); deposed, it steps down.
 */
export function startElection(
  ctx: ElectionContext,
  election: LeaderElection,
  ledger: Ledger | undefined,
): void {
  const { coordinator, clock, logger, events, advertiseUrl } = ctx
  coordinator.fence(() => election.leadingUntilMs())
  election.on('elected', () => {
    void (async () => {
      let restored: LedgerEntry[] | undefined
      if (ledger !== undefined)
        restored = await ledger.load().catch((error: unknown) => {
          logger.error({ err: error }, 'the ledger on etcd cannot be read; learning instead')
          return undefined
        })
      if (election.leadingUntilMs() > clock.now()) {
        coordinator.becomeLeader(restored)
        events.emit('role', 'leader', advertiseUrl)
      }
    })()
  })
  election.on('deposed', (reason: string) => {
    coordinator.stepDown(undefined, reason)
    events.emit('role', 'follower', reason)
  })
  election.on('leader', (url: string | undefined) =>
    // Our own URL while we do not lead is a key of an earlier life of ours: nobody known yet.
    coordinator.setLeaderUrl(url === advertiseUrl ? undefined : url),
  )
  election.start()
}
