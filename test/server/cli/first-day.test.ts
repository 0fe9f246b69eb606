import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { describe, expect, it } from 'vitest'
import { createClient } from '../../../client/index.js'
import { Replica, assertBuilt } from '../../helpers/replica.js'

// What a newcomer does on the first day: start the coordinator on the config `npm start`
// runs (examples/default.yaml; here on a free port and a fresh data directory, as a fresh
// clone has), then a client with default options. Its first requests must be admitted the
// moment ready() resolves: no learning wait (a new ledger), and a bucket that starts full
// (nobody held the resource before).

describe('the first day, as the README has it', () => {
  it('npm start, then a client with default options: leased, and its first five requests admitted at once', async () => {
    assertBuilt()
    const dir = await mkdtemp(join(tmpdir(), 'sluice-first-day-'))
    const replica = await Replica.spawn([
      '--config',
      'examples/default.yaml',
      '--port',
      '0',
      '--data-dir',
      join(dir, 'data'),
    ])
    const client = createClient({ url: replica.wsUrl })
    try {
      const payments = client.resource('payments-api')
      // An upper bound, not a measurement: the lease comes within a round trip or two.
      await payments.ready({ timeoutMs: 10_000 })
      expect(payments.lease?.full).toBe(true)
      let admitted = 0
      for (let i = 0; i < 5; i++) if (payments.tryAcquire()) admitted++
      expect(admitted).toBe(5)
      const db = client.resource('db-writes')
      await db.ready({ timeoutMs: 10_000 })
      expect(db.tryAcquire()).toBe(true)
    } finally {
      await client.close()
      await replica.kill('SIGTERM')
      await rm(dir, { recursive: true, force: true })
    }
  })
})
