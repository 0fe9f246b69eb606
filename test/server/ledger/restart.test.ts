import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterEach, describe, expect, it } from 'vitest'
import type { createCoordinator } from '../../../server/index.js'
import { type RunningCoordinator } from '../../../server/index.js'
import { ManualClock } from '../../../shared/index.js'
import { simpleConfig } from '../../helpers/coordinator.js'
import { embeddedLedger } from '../../helpers/embedded-ledger.js'

// A single coordinator with the embedded ledger, restarted on the same port and data directory:
// it resumes from what it wrote, so it grants what is free at once instead of learning.

const closers: Array<() => Promise<unknown>> = []
afterEach(async () => {
  for (const c of closers.splice(0).reverse()) await c()
})

const clock = new ManualClock()
// Learning as long as the default (a commitment's life) when there is no ledger.
const config = simpleConfig({ learningMs: 1700 })

const ledger = embeddedLedger(clock, closers)
const { client, step } = ledger
const start = (
  dataDir: string,
  port = 0,
  withConfig: Parameters<typeof createCoordinator>[0]['config'] = config,
): Promise<RunningCoordinator> => ledger.start(withConfig, dataDir, port)

describe('the embedded ledger', () => {
  it('lets a restarted coordinator resume at once: what clients hold stays counted, what is free is granted without learning', async () => {
    const dataDir = mkdtempSync(join(tmpdir(), 'sluice-data-'))
    closers.push(async () => rmSync(dataDir, { recursive: true, force: true }))
    let server = await start(dataDir)
    const port = server.port
    // The first start in an empty data directory serves at once: nothing can be outstanding.
    expect(server.coordinator.ledgerState).toEqual({ kind: 'file', started: 'restored' })
    const a = client(server.wsUrl, 'a')
    const ra = a.resource('api', { wants: 200, failureMode: 'pessimistic' })
    for (let t = 0; t < 2000; t += 50) await step(server, [a], 50)
    expect(ra.capacity, 'a before the restart').toBe(200)

    // The coordinator dies (its clients do not release anything) and comes back.
    await server.close()
    server = await start(dataDir, port)
    expect(server.coordinator.ledgerState.started).toBe('restored')
    expect(server.coordinator.view.committed('api'), 'restored').toBe(200)
    const b = client(server.wsUrl, 'b')
    const rb = b.resource('api', { wants: 300, failureMode: 'pessimistic' })
    let sum = 0
    for (let t = 0; t < 300; t += 50) {
      await step(server, [a, b], 50)
      sum = Math.max(sum, ra.capacity + rb.capacity)
    }
    // Within a few round trips, not a learning period (1.7 s): what a does not hold, b has.
    expect(rb.capacity).toBeGreaterThanOrEqual(100)
    expect(sum).toBeLessThanOrEqual(300)
    expect(server.coordinator.view.committed('api')).toBeLessThanOrEqual(300)
  })

  it('resumes from a ledger compacted from the pool (no copy of every entry kept): what clients hold stays counted', async () => {
    const dataDir = mkdtempSync(join(tmpdir(), 'sluice-data-'))
    closers.push(async () => rmSync(dataDir, { recursive: true, force: true }))
    let server = await start(dataDir)
    const port = server.port
    const a = client(server.wsUrl, 'a')
    const b = client(server.wsUrl, 'b')
    const ra = a.resource('api', { wants: 100, failureMode: 'pessimistic' })
    const rb = b.resource('api', { wants: 150, failureMode: 'pessimistic' })
    // Renewals every few hundred ms: well over 64 writes, so the log is compacted (from the
    // pool's entries) at least once, and the restart reads a snapshot and the lines after it.
    for (let t = 0; t < 15_000; t += 50) await step(server, [a, b], 50)
    const writes = (await server.http.inject('/metrics')).body.match(
      /^sluice_ledger_writes_total (\d+)/m,
    )
    expect(Number(writes?.[1]), 'ledger writes').toBeGreaterThan(70)
    const lines = readFileSync(join(dataDir, 'ledger.log'), 'utf8').split('\n').length - 1
    expect(lines, 'lines in the log (compacted)').toBeLessThan(66)
    expect([ra.capacity, rb.capacity]).toEqual([100, 150])

    await server.close()
    server = await start(dataDir, port)
    expect(server.coordinator.ledgerState.started).toBe('restored')
    expect(server.coordinator.view.committed('api'), 'restored').toBe(250)
    // A newcomer gets what neither holds at once, and its max-min share (100) once b's lease
    // shrinks: never more than capacity between the three.
    const c = client(server.wsUrl, 'c')
    const rc = c.resource('api', { wants: 300, failureMode: 'pessimistic' })
    let sum = 0
    for (let t = 0; t < 3000; t += 50) {
      await step(server, [a, b, c], 50)
      sum = Math.max(sum, ra.capacity + rb.capacity + rc.capacity)
    }
    expect([ra.capacity, rb.capacity, rc.capacity]).toEqual([100, 100, 100])
    expect(sum).toBeLessThanOrEqual(300)
    expect(server.coordinator.view.committed('api')).toBeLessThanOrEqual(300)
  })

  it('keeps what a quota’s processes reported used: a restarted coordinator’s status shows it before any report', async () => {
    const dataDir = mkdtempSync(join(tmpdir(), 'sluice-data-'))
    closers.push(async () => rmSync(dataDir, { recursive: true, force: true }))
    const quota = {
      resources: [
        { match: 'mail', kind: 'quota' as const, capacity: 1000, window: '1d', refreshMs: 200 },
      ],
    }
    let server = await start(dataDir, 0, quota)
    const port = server.port
    const a = client(server.wsUrl, 'a')
    const mail = a.resource('mail', { kind: 'quota' })
    let used = 0
    for (let t = 0; t < 2000; t += 50) {
      for (let i = 0; i < 3; i++) if (mail.tryAcquire()) used++
      await step(server, [a], 50)
    }
    // Blocks come with reports: the used ones went out with the budget that covers them.
    for (let t = 0; t < 600; t += 50) await step(server, [a], 50)
    const before = (await server.http.inject('/v1/resources/mail')).json<{
      quota: { used: number }
    }>()
    expect(before.quota.used).toBe(used)
    expect(used).toBeGreaterThan(50)

    await server.close()
    server = await start(dataDir, port, quota)
    const after = (await server.http.inject('/v1/resources/mail')).json<{
      quota: { used: number }
    }>()
    // As of the last block written: every block goes to the ledger before it is sent.
    expect(after.quota.used).toBeGreaterThan(0)
    expect(after.quota.used).toBeLessThanOrEqual(used)
  })

  it('learns instead when the ledger cannot be trusted, and says so', async () => {
    const dataDir = mkdtempSync(join(tmpdir(), 'sluice-data-'))
    closers.push(async () => rmSync(dataDir, { recursive: true, force: true }))
    writeFileSync(join(dataDir, 'ledger.log'), 'not a ledger\nat all\n')
    const server = await start(dataDir)
    expect(server.coordinator.ledgerState).toEqual({ kind: 'file', started: 'learning' })
    const ready = (await server.http.inject('/readyz')).json()
    expect(ready.ledger).toEqual({ kind: 'file', started: 'learning' })
    const errors = await server.coordinator.metrics.errors.get()
    expect(errors.values.find((v) => v.labels.code === 'SLUICE_ERR_LEDGER_CORRUPT')?.value).toBe(1)
  })

  it('serves at once in a new data directory, and learns once a client holds a lease of another ledger', async () => {
    const first = mkdtempSync(join(tmpdir(), 'sluice-data-'))
    const second = mkdtempSync(join(tmpdir(), 'sluice-data-'))
    closers.push(async () => rmSync(first, { recursive: true, force: true }))
    closers.push(async () => rmSync(second, { recursive: true, force: true }))
    let server = await start(first)
    const port = server.port
    const a = client(server.wsUrl, 'a')
    const ra = a.resource('api', { wants: 200, failureMode: 'pessimistic' })
    for (let t = 0; t < 1000; t += 50) await step(server, [a], 50)
    expect(ra.capacity).toBe(200)

    // The data directory is lost: the coordinator comes back on the same port with an empty one.
    await server.close()
    server = await start(second, port)
    expect(server.coordinator.ledgerState.started, 'a new ledger serves at once').toBe('restored')
    for (let t = 0; t < 300; t += 50) await step(server, [a], 50)
    // a's hello named the first ledger and claimed what this one does not know of: learn.
    expect(server.coordinator.ledgerState.started).toBe('learning')
    const b = client(server.wsUrl, 'b')
    const rb = b.resource('api', { wants: 300, failureMode: 'pessimistic' })
    for (let t = 0; t < 600; t += 50) {
      await step(server, [a, b], 50)
      expect(ra.capacity + rb.capacity, 'never beyond capacity').toBeLessThanOrEqual(300)
    }
    expect(rb.capacity, 'b waits for the learning period').toBe(0)
  })
})
