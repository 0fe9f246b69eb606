import { EventEmitter } from 'node:events'
import type { LeaderElection } from '../../server/ha/index.js'

/**
 * An election a test decides: `elect()`, `depose()`, `announce(url)`. For
 * what real etcd cannot be made to do on cue (a redirect loop between two
 * followers, a follower that never learns the leader); the etcd tests cover
 * the real election.
 */
export class ManualElection extends EventEmitter implements LeaderElection {
  readonly advertiseUrl: string
  started = false
  closed = false
  /** What `leadingUntilMs` answers while elected; a test moves it to play a lapsed lease. */
  deadlineMs = Infinity
  #leading = false

  constructor(advertiseUrl: string) {
    super()
    this.advertiseUrl = advertiseUrl
  }

  start(): void {
    this.started = true
  }

  close(): Promise<void> {
    this.closed = true
    return Promise.resolve()
  }

  leadingUntilMs(): number {
    return this.#leading ? this.deadlineMs : -Infinity
  }

  elect(): void {
    this.#leading = true
    this.emit('elected')
  }

  depose(reason = 'test'): void {
    this.#leading = false
    this.emit('deposed', reason)
  }

  announce(url: string | undefined): void {
    this.emit('leader', url)
  }
}
