import { describe, expect, it } from 'vitest'
import { Central, type CentralHost } from '../../../server/coordinator/central.js'
import type { FamilySettings } from '../../../server/config/index.js'
import { ManualClock, nextTurn, type ClientMessage } from '../../../shared/index.js'
import { silentLogger } from '../../helpers/coordinator.js'

const turn = (): Promise<void> => new Promise((resolve) => nextTurn(resolve))

describe('the central part’s in-process connection', () => {
  it('hands each frame over at a turn of the event loop of its own, not in the turn that sent it', async () => {
    // The central part's report, its leases and their decoding took 3–10 ms each second as
    // microtasks of one turn, and remote decisions asked meanwhile waited for all of it (#41).
    const received: ClientMessage['type'][] = []
    const family = { prefix: 'k', keyKind: 'rate' } as unknown as FamilySettings
    const host: CentralHost = {
      receive: (_session, msg) => void received.push(msg.type),
      disconnected: () => undefined,
      familyOfKey: () => family,
      familyOf: (id) => (id === 'k/*' ? family : undefined),
      allows: () => true,
    }
    const central = new Central(host, new ManualClock(), silentLogger)
    try {
      central.holdFor({ tenant: undefined } as never, 'k/*')
      // No microtask delivers anything: the socket opens at the next turn.
      for (let i = 0; i < 100; i++) await Promise.resolve()
      expect(received).toEqual([])
      // It opens, and the client sends its hello in that turn; the hello arrives at the next.
      await turn()
      for (let i = 0; i < 100; i++) await Promise.resolve()
      expect(received).toEqual([])
      await turn()
      expect(received).toEqual(['hello'])
    } finally {
      central.closeAll()
    }
  })
})
