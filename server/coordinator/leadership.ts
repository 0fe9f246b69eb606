import type { ErrorCode } from '../../shared/index.js'
import type { SessionPort } from './session-port.js'

/** `leader` grants leases; a `follower` redirects clients to the leader (high availability). */
export type Role = 'leader' | 'follower'

/**
 * Who leads, as this replica knows it: its role, the leader's URL a
 * follower last heard, and, once fenced by an election, until when it surely
 * leads. The coordinator makes the transitions; this keeps the facts.
 */
export class Leadership {
  role: Role
  /** The leader's advertised WebSocket URL, as a follower last heard it. */
  leaderUrl: string | undefined
  /** Leadership comes from an election: a replica that cannot write its ledger steps down. */
  elected = false
  /** Until when this replica surely leads (an election's lease); always, without one. */
  #leadingUntilMs: () => number = () => Infinity

  constructor(role: Role) {
    this.role = role
  }

  /** Fenced: from now on a leader grants only while `leadingUntilMs` is ahead of now. */
  fence(leadingUntilMs: () => number): void {
    this.#leadingUntilMs = leadingUntilMs
    this.elected = true
  }

  /** Whether a leader is still surely leading at `nowMs` (a follower never is). */
  leadsAt(nowMs: number): boolean {
    return this.role === 'leader' && nowMs < this.#leadingUntilMs()
  }

  /** A follower's answer to a client: the leader's URL, or come back later. */
  sendAway(session: SessionPort, fail: (code: ErrorCode, detail: string) => void): void {
    if (this.leaderUrl !== undefined) {
      session.send({ type: 'redirect', url: this.leaderUrl })
      fail('SLUICE_ERR_NOT_LEADER', `the leader is ${this.leaderUrl}`)
    } else {
      fail('SLUICE_ERR_NO_LEADER', 'election in progress')
    }
  }
}
