import { describe, expect, it } from 'vitest'
import { RoundScheduler } from '../../../server/coordinator/scheduler.js'
import { ManualClock } from '../../../shared/index.js'

function setup(debounceMs = 20) {
  const clock = new ManualClock()
  const rounds: string[] = []
  const grants: string[] = []
  const renewals: string[] = []
  const scheduler = new RoundScheduler(
    clock,
    () => debounceMs,
    (id) => {
      scheduler.settlePrompt(id)
      rounds.push(id)
    },
    (id) => grants.push(id),
    (id) => renewals.push(id),
  )
  scheduler.ensure('api', 1000)
  return { clock, scheduler, rounds, grants, renewals }
}

describe('round scheduler', () => {
  it('runs one grant of waiting increases a debounce after the first prompt, however many come', () => {
    const { clock, scheduler, grants } = setup()
    scheduler.promptGrant('api')
    clock.advance(10)
    scheduler.promptGrant('api')
    expect(grants).toEqual([])
    clock.advance(10)
    expect(grants).toEqual(['api'])
    clock.advance(100)
    expect(grants).toEqual(['api'])
    scheduler.promptGrant('api')
    clock.advance(20)
    expect(grants).toEqual(['api', 'api'])
  })

  it('leaves the grant to a round: none while a prompt round is pending, none once a round ran', () => {
    const { clock, scheduler, rounds, grants } = setup()
    scheduler.prompt('api')
    scheduler.promptGrant('api')
    clock.advance(20)
    expect(rounds).toEqual(['api'])
    expect(grants).toEqual([])
    scheduler.promptGrant('api')
    clock.advance(5)
    scheduler.settlePrompt('api') // a round runs (its own grants are partial)
    clock.advance(20)
    expect(grants).toEqual([])
  })

  it('drops a pending grant with the resource, and ignores resources without rounds', () => {
    const { clock, scheduler, grants } = setup()
    scheduler.promptGrant('api')
    scheduler.promptGrant('other')
    scheduler.drop('api')
    clock.advance(100)
    expect(grants).toEqual([])
  })

  it('runs one round at a window’s edge, once however often it is asked, and none once dropped', () => {
    const { clock, scheduler, rounds } = setup()
    clock.advance(200)
    scheduler.edgeAt('api', 750)
    scheduler.edgeAt('api', 750)
    clock.advance(549)
    expect(rounds).toEqual([])
    clock.advance(1)
    expect(rounds).toEqual(['api'])
    clock.advance(250) // the interval's round at 1000 ms
    expect(rounds).toEqual(['api', 'api'])
    scheduler.edgeAt('api', 1500)
    scheduler.drop('api')
    clock.advance(600)
    expect(rounds).toEqual(['api', 'api'])
  })

  it('sends a quota’s leases again once before its window’s edge, none for a time past, and none once dropped', () => {
    const { clock, scheduler, rounds, renewals } = setup()
    clock.advance(200)
    scheduler.renewAt('api', 650)
    scheduler.renewAt('api', 650)
    clock.advance(449)
    expect(renewals).toEqual([])
    clock.advance(1)
    expect(renewals).toEqual(['api'])
    // A renewal is no round.
    expect(rounds).toEqual([])
    scheduler.renewAt('api', 600)
    clock.advance(100)
    expect(renewals).toEqual(['api'])
    scheduler.renewAt('api', 1400)
    scheduler.drop('api')
    clock.advance(1000)
    expect(renewals).toEqual(['api'])
  })
})
