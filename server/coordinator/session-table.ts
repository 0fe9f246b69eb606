import type { ServerMessage } from '../../shared/index.js'
import { clientKey, type LeaseBatch } from '../pool/index.js'
import type { SessionPort } from './session-port.js'

/** The live session of each client (by its pool key: the id scoped by tenant): where lease batches and replies go. */
export class SessionTable {
  readonly #sessions = new Map<string, SessionPort>()

  get size(): number {
    return this.#sessions.size
  }

  /** Whether `session` is the live one for its client id. */
  isLive(session: SessionPort): boolean {
    return (
      session.clientId !== undefined &&
      this.#sessions.get(clientKey(session.tenant, session.clientId)) === session
    )
  }

  /**
   * Binds a client id to `session`. A previous session with the id is
   * detached and closed with SLUICE_ERR_SESSION_REPLACED.
   */
  bind(session: SessionPort, key: string, clientId: string, tenant: string | undefined): void {
    const previous = this.#sessions.get(key)
    if (previous !== undefined && previous !== session) {
      this.#sessions.delete(key)
      previous.clientId = undefined
      previous.fail('SLUICE_ERR_SESSION_REPLACED', 'a newer connection took over this client id')
    }
    session.clientId = clientId
    session.tenant = tenant
    this.#sessions.set(key, session)
  }

  /** Forgets a session; false when it was not the live one. */
  unbind(session: SessionPort): boolean {
    if (!this.isLive(session)) return false
    this.#sessions.delete(clientKey(session.tenant, session.clientId!))
    return true
  }

  /** The live session of a client, by its pool key. */
  get(key: string): SessionPort | undefined {
    return this.#sessions.get(key)
  }

  send(key: string, message: ServerMessage): boolean {
    const session = this.#sessions.get(key)
    if (session === undefined) return false
    session.send(message)
    return true
  }

  /**
   * Sends each batch to its client's live session, stamped `atMs` (the coordinator's clock as
   * they leave); returns how many went out.
   */
  deliver(batches: readonly LeaseBatch[], atMs: number): number {
    let sent = 0
    const at = Math.max(0, Math.floor(atMs))
    for (const batch of batches)
      if (this.send(batch.clientKey, { type: 'lease', seq: batch.seq, leases: batch.leases, at }))
        sent++
    return sent
  }

  /** Empties the table and returns the sessions it held (to close or redirect them). */
  takeAll(): SessionPort[] {
    const all = [...this.#sessions.values()]
    this.#sessions.clear()
    return all
  }
}
