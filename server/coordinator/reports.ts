import type { AckMessage, DemandMessage, ReleaseMessage } from '../../shared/index.js'
import { clientKey } from '../pool/index.js'
import { admitEntries, admitPriorities, FrameRefusals } from './admission.js'
import type { Core } from './core.js'
import type { SessionPort } from './session-port.js'

/**
 * What a client says once welcomed: its demand (admitted entry by entry; a
 * new resource gets its rounds), its acks of decreases and its releases.
 * The pool decides; what it grants goes out through `sendLeases` (the outbox writes, then
 * delivers).
 */
export function demand(core: Core, session: SessionPort, msg: DemandMessage): void {
  const key = keyOf(session)
  const refusals = new FrameRefusals(false)
  const banded = admitPriorities(core, session.tenant, msg.resources, refusals.add)
  // A report names a family's keys only with the family (a KeyedFamily's): a key alone is
  // client.resource() where client.keyed() was meant (SLUICE_ERR_RESOURCE_KEYED).
  const reports = admitEntries(core, key, session.tenant, banded, (e) => e.resource, refusals.add, {
    keysNeedFamily: true,
  })
  answer(core, session, refusals)
  for (const r of reports)
    if (r.usage !== undefined) core.observer.record(r.resource, key, session.tenant, r.usage)
  const { batches, newResources, overReported } = core.pool.reportDemand(
    key,
    reports,
    core.clock.now(),
    msg.n,
    session.rttMs,
    msg.at,
  )
  core.sendLeases(batches)
  if (overReported.length > 0) {
    const over = new FrameRefusals(false)
    for (const id of overReported)
      over.add(id, {
        code: 'SLUICE_ERR_REPORT_INVALID',
        detail: `${JSON.stringify(id)}: counted as what the client was leased of the window`,
      })
    answer(core, session, over)
  }
  for (const id of newResources) {
    core.rounds.ensure(id)
    core.rounds.prompt(id)
  }
  if (msg.early === true) for (const r of reports) core.rounds.prompt(r.resource)
}

/** Acks of decreases: what waited for them is granted; a downstream's parent may take back. */
export function ack(core: Core, session: SessionPort, msg: AckMessage): void {
  core.metrics.acks.inc()
  core.sendLeases(
    core.pool.acknowledge(
      keyOf(session),
      msg.seq,
      msg.resources,
      core.clock.now(),
      msg.gave,
      msg.held,
    ),
  )
  core.rounds.promptWaiting()
  core.settings.upstream?.drained()
}

/** A client gives leases back: the freed capacity goes out in the next rounds. */
export function release(core: Core, session: SessionPort, msg: ReleaseMessage): void {
  core.sendLeases(
    core.pool.release(keyOf(session), msg.resources, core.clock.now(), msg.spent, msg.held),
  )
  core.rounds.promptWaiting()
  for (const id of msg.resources) core.rounds.prompt(id)
  core.settings.upstream?.drained()
}

/** Answers a frame's refusals: one error message per code, each counted. */
export function answer(core: Core, session: SessionPort, refusals: FrameRefusals): void {
  refusals.flush(
    (message) => session.send(message),
    (code, n) => core.metrics.errors.inc({ code }, n),
  )
}

/** The pool's key of a welcomed session's client. */
export function keyOf(session: SessionPort): string {
  return clientKey(session.tenant, session.clientId!)
}
