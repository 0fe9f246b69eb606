import { protocolVersion, type HelloMessage } from '../../shared/index.js'
import { clientKey, type Holding } from '../pool/index.js'
import { admitClient, admitEntries, FrameRefusals } from './admission.js'
import type { Core } from './core.js'
import { provenHolding, type ClaimedHolding } from './proofs.js'
import { answer } from './reports.js'
import type { SessionPort } from './session-port.js'

/**
 * A client's hello: its token (slowed against guessing), its id bound to
 * this session (a newer connection takes an id over), the welcome, then the
 * holdings it claims: those it may use, as far as their proofs verify, are
 * learnt by the pool.
 */
export function hello(host: Core, session: SessionPort, msg: HelloMessage): void {
  if (host.config.requiresToken && !host.guard.mayTry(session.remoteAddress, 'websocket'))
    return host.fail(session, 'SLUICE_ERR_AUTH_RATE_LIMITED', 'wait before trying another token')
  const verdict = admitClient(host, msg, session.upgradeToken, session.internal)
  if ('code' in verdict) {
    if (verdict.code === 'SLUICE_ERR_AUTH_INVALID_TOKEN')
      host.guard.failed(session.remoteAddress, 'websocket')
    return host.fail(session, verdict.code, verdict.detail)
  }
  const tenant = verdict.tenant
  const key = clientKey(tenant, msg.clientId)
  host.sessions.bind(session, key, msg.clientId, tenant)
  host.observer.usage.identify(key, { name: msg.name, library: msg.library })
  const outcome = host.pool.connect(key, msg.clientId, tenant, msg.instance, host.clock.now())
  host.metrics.connections.set(host.sessions.size)
  // A takeover of the coordinator's own part frees what its dead predecessor held: the others'
  // rises go out now, not with the next message's leases.
  const freed = outcome === 'replaced' ? host.pool.takeBatches() : []
  if (freed.length > 0) host.sendLeases(freed)
  if (outcome === 'replaced' && session.internal === undefined)
    host.log.warn(
      { clientId: msg.clientId, tenant },
      'another process took this client id over; the old one keeps its leases until they lapse',
    )
  host.log.info(
    { clientId: msg.clientId, tenant, outcome, holdings: msg.holdings?.length ?? 0 },
    'client connected',
  )
  session.send({
    type: 'welcome',
    v: protocolVersion,
    clientId: msg.clientId,
    ...(tenant === undefined ? {} : { tenant }),
    learningMs: Math.round(host.learningLeftMs),
    heartbeatMs: host.limits.heartbeatMs,
    ...(host.ledgerId === undefined ? {} : { ledger: host.ledgerId }),
  })
  // Holdings of resources the client may not use are dropped quietly but for real refusals:
  // an unknown resource in a hello is what a config change leaves behind, not a mistake.
  const refusals = new FrameRefusals(true)
  const holdings = admitEntries(
    host,
    key,
    tenant,
    msg.holdings ?? [],
    (r) => r.resource,
    refusals.add,
  )
  answer(host, session, refusals)
  if (holdings.length === 0) return
  witness(host, key, msg.ledger, holdings)
  const proven = holdings.map((h) => provenOf(host, msg.clientId, tenant, h))
  host.sendLeases(host.pool.learnHoldings(key, proven, host.clock.now()))
  for (const h of holdings) host.rounds.ensure(h.resource)
}

/**
 * A client as witness of the ledger: it holds more than this coordinator's
 * ledger records for it, leased under another ledger (or none), or under
 * this one but later than the copy restored knows (a data directory put
 * back from an older copy: every lease is written before it is sent, so an
 * intact ledger always counts at least what a client can claim). A data
 * directory that was lost, replaced or rolled back can only be told this
 * way, so a coordinator that resumed without learning starts learning now,
 * as it would have from its start: nothing more is granted until what the
 * unknown ledger sent has lapsed.
 */
function witness(
  host: Core,
  key: string,
  ledger: string | undefined,
  holdings: readonly ClaimedHolding[],
): void {
  if (!host.restored) return
  const nowMs = host.clock.now()
  const unknown = holdings.find(
    (h) =>
      Math.max(h.capacity, h.inFlight ?? 0) > host.pool.committedBy(key, h.resource, nowMs) + 1e-9,
  )
  if (unknown === undefined) return
  host.distrustLedger()
  host.metrics.errors.inc({ code: 'SLUICE_ERR_LEDGER_CORRUPT' })
  host.log.error(
    { ledger: host.ledgerId, claimedFrom: ledger ?? null, resource: unknown.resource },
    ledger === host.ledgerId
      ? 'a client holds a lease this ledger does not know though it names this ledger (a data directory put back from an older copy?): learning now, as from the start'
      : 'a client holds a lease this ledger does not know (a lost or replaced data directory?): learning now, as from the start',
  )
}

/** How much of a claimed holding counts (`provenHolding`); a claim that does not verify is logged. */
function provenOf(
  host: Core,
  clientId: string,
  tenant: string | undefined,
  h: ClaimedHolding,
): Holding {
  const holder = { tenant, clientId }
  const { capacity, claimed, suspect, issued } = provenHolding(
    host.keys,
    holder,
    h,
    host.clock.wallNow(),
  )
  if (suspect)
    host.log.warn(
      { clientId, tenant, resource: h.resource, claimed },
      'holding not restored: its proof does not verify',
    )
  return { resource: h.resource, capacity, issued }
}
