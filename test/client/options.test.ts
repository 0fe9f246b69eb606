import { pino } from 'pino'
import { describe, expect, it } from 'vitest'
import { createClient } from '../../client/index.js'
import { ManualClock } from '../../shared/index.js'
import { closedAfterEach } from '../helpers/coordinator.js'

describe('client options and resource ids', () => {
  const track = closedAfterEach()

  it('refuses unknown client options, naming the option', () => {
    expect(() => createClient({ url: 'ws://127.0.0.1:1/v1/connect', wieght: 2 } as never)).toThrow(
      expect.objectContaining({ code: 'SLUICE_ERR_OPTION_INVALID' }),
    )
  })

  it('warns, through its logger, that an optimistic resource may exceed capacity', () => {
    const lines: string[] = []
    const logger = pino({ level: 'warn' }, { write: (line: string) => void lines.push(line) })
    const client = createClient({
      url: 'ws://127.0.0.1:1/v1/connect',
      clock: new ManualClock(),
      logger,
    })
    track.running.push(client)
    client.resource('safe-one')
    expect(lines).toEqual([])
    client.resource('risky', { failureMode: 'optimistic' })
    expect(lines.join('')).toContain('may admit beyond the cluster-wide capacity')
  })

  it('checks resource options strictly, with the key meant and what other limiters call things', () => {
    const client = createClient({ url: 'ws://127.0.0.1:1/v1/connect', clock: new ManualClock() })
    track.running.push(client)
    const refusal = (options: unknown): string => {
      try {
        client.resource('api', options as never)
      } catch (error) {
        expect(error).toMatchObject({ code: 'SLUICE_ERR_OPTION_INVALID' })
        return (error as Error).message
      }
      throw new Error('accepted')
    }
    expect(refusal({ wieght: 2 })).toContain('unknown key wieght (did you mean weight?)')
    expect(refusal({ max: 10 })).toContain('set wants for demand')
    expect(refusal({ failureMode: 'safee' })).toContain('received "safee"')
    expect(() => createClient({} as never)).toThrow(/url: required/)
    expect(() => createClient({ url: 'http://127.0.0.1:7070/v1/connect' })).toThrow(
      /must be a ws:\/\/ or wss:\/\/ URL/,
    )
  })

  it('refuses a resource id the protocol cannot carry, with SLUICE_ERR_RESOURCE_INVALID', () => {
    const client = createClient({ url: 'ws://127.0.0.1:1/v1/connect', clock: new ManualClock() })
    track.running.push(client)
    for (const id of ['', 'a\u0000b', 'x'.repeat(1025)])
      expect(() => client.resource(id)).toThrow(
        expect.objectContaining({ code: 'SLUICE_ERR_RESOURCE_INVALID' }),
      )
    expect(client.resource('a/b c').id).toBe('a/b c')
  })
})
