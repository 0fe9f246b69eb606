import fc from 'fast-check'
import {
  appendFileSync,
  mkdtempSync,
  readFileSync,
  rmSync,
  statSync,
  truncateSync,
  writeFileSync,
} from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { spawn } from 'node:child_process'
import { once } from 'node:events'
import { afterEach, describe, expect, it } from 'vitest'
import { encodeLine } from '../../../server/ledger/file-format.js'
import {
  FileLedger,
  MemoryLedger,
  entryKey,
  type LedgerChange,
  type LedgerEntry,
} from '../../../server/ledger/index.js'

const dirs: string[] = []
afterEach(() => {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true })
})
function dir(): string {
  const d = mkdtempSync(join(tmpdir(), 'sluice-ledger-'))
  dirs.push(d)
  return d
}

const entry = fc.record({
  clientKey: fc.constantFrom('a', 'b', 't\u0000c'),
  clientId: fc.constantFrom('a', 'b', 'c'),
  tenant: fc.constantFrom(undefined, 't'),
  instance: fc.constantFrom(undefined, 'inst-0001'),
  resource: fc.constantFrom('api', 'db/writes'),
  pinned: fc.boolean(),
  commitments: fc.array(
    fc.record({
      capacity: fc.integer({ min: 0, max: 1000 }),
      untilMs: fc.integer({ min: 0, max: 1e12 }),
      fallback: fc.integer({ min: 0, max: 1000 }),
      fallbackUntilMs: fc.integer({ min: 0, max: 1e12 }),
    }),
    { maxLength: 3 },
  ),
}) as fc.Arbitrary<LedgerEntry>
const change: fc.Arbitrary<LedgerChange> = fc.oneof(
  entry.map((put) => ({ put })),
  entry.map((e) => ({ remove: { clientKey: e.clientKey, resource: e.resource } })),
)
const byKey = (entries: readonly LedgerEntry[] | undefined) =>
  Object.fromEntries((entries ?? []).map((e) => [entryKey(e.clientKey, e.resource), e]))

describe('file ledger', () => {
  it(
    'loads what a memory ledger holds after the same writes, across reopenings and compactions',
    // Real files, a datasync per write: 13 s alone, past 30 s in a loaded CI run.
    { timeout: 120_000 },
    async () => {
      await fc.assert(
        fc.asyncProperty(
          fc.array(fc.array(change, { minLength: 1, maxLength: 4 }), { maxLength: 120 }),
          fc.integer({ min: 1, max: 5 }),
          async (writes, reopenEvery) => {
            const path = dir()
            const reference = new MemoryLedger()
            let ledger = new FileLedger(path)
            await ledger.load()
            for (const [i, w] of writes.entries()) {
              reference.write(w)
              await ledger.write(w)
              if (i % reopenEvery === 0) {
                await ledger.close()
                ledger = new FileLedger(path)
                expect(byKey(await ledger.load())).toEqual(byKey(reference.entries()))
              }
            }
            await ledger.close()
            expect(byKey(await new FileLedger(path).load())).toEqual(byKey(reference.entries()))
          },
        ),
        { numRuns: Math.max(20, Math.floor(fc.readConfigureGlobal().numRuns! / 10)) },
      )
    },
  )

  it(
    'with snapshotFrom, compacts into what its source holds, and loads what a memory ledger holds after the same writes',
    // Real files, a datasync per write: 13 s alone, past 30 s in a loaded CI run.
    { timeout: 120_000 },
    async () => {
      await fc.assert(
        fc.asyncProperty(
          fc.array(fc.array(change, { minLength: 1, maxLength: 4 }), {
            minLength: 70,
            maxLength: 150,
          }),
          async (writes) => {
            const path = dir()
            const reference = new MemoryLedger()
            const ledger = new FileLedger(path)
            await ledger.load()
            // As the coordinator's pool is: every entry written, with the next write's already in.
            let ahead: LedgerChange[] = []
            ledger.snapshotFrom(() => {
              const source = new MemoryLedger()
              source.write(reference.entries().map((put) => ({ put })))
              source.write(ahead)
              return source.entries()
            })
            for (const [i, w] of writes.entries()) {
              ahead = writes[i + 1] ?? []
              reference.write(w)
              await ledger.write(w)
            }
            await ledger.close()
            // Past 64 lines it compacted at least once, from the source: the file is short.
            expect(readFileSync(ledger.path, 'utf8').split('\n').length).toBeLessThan(writes.length)
            expect(byKey(await new FileLedger(path).load())).toEqual(byKey(reference.entries()))
          },
        ),
        { numRuns: Math.max(10, Math.floor(fc.readConfigureGlobal().numRuns! / 20)) },
      )
    },
  )

  it('with snapshotFrom, keeps no entry of its own: a snapshot holds what the source says', async () => {
    const path = dir()
    const ledger = new FileLedger(path)
    await ledger.load()
    const put = (resource: string, untilMs: number): LedgerEntry => ({
      clientKey: 'a',
      clientId: 'a',
      tenant: undefined,
      instance: undefined,
      resource,
      pinned: false,
      commitments: [{ capacity: 1, untilMs, fallback: 1, fallbackUntilMs: untilMs }],
    })
    // The source has moved on (a renewed, b gone, c new): a compaction writes that, not the log.
    ledger.snapshotFrom(() => [put('a', 99), put('c', 7)])
    for (let i = 0; i < 70; i++) await ledger.write([{ put: put('a', i) }, { put: put('b', i) }])
    await ledger.close()
    // Compacted after line 65 into the source's a and c; the five writes after put a and b again.
    expect(byKey(await new FileLedger(path).load())).toEqual(
      byKey([put('a', 69), put('b', 69), put('c', 7)]),
    )
  })

  it('starts a new ledger, with nothing outstanding, in a data directory that held nothing', async () => {
    const ledger = new FileLedger(join(dir(), 'fresh'))
    expect(await ledger.load()).toEqual([])
    expect(ledger.fresh).toBe(true)
    expect(ledger.id).toMatch(/^[0-9a-f]{32}$/)
    await ledger.close()
    const again = new FileLedger(ledger.path.replace(/ledger\.log$/, ''))
    expect(await again.load()).toEqual([])
    expect(again.fresh, 'the second start is a restart').toBe(false)
    expect(again.id).toBe(ledger.id)
    await again.close()
  })

  it('keeps its writer’s last sign of life beside it, for the next load: its own, not another ledger’s', async () => {
    const path = dir()
    const ledger = new FileLedger(path)
    await ledger.load()
    expect(ledger.aliveWindowsMs).toBeUndefined()
    await ledger.markAlive(1_800_000_000_123.4)
    await ledger.markAlive(1_800_000_000_373.4)
    await ledger.close()
    const again = new FileLedger(path)
    await again.load()
    expect(again.aliveWindowsMs).toBe(1_800_000_000_373)
    await again.close()
    // A sign of another ledger's writer (this one lost and a new one started) says nothing.
    writeFileSync(
      join(path, 'ledger.alive'),
      JSON.stringify({ ledger: 'f'.repeat(32), windowsMs: 5 }),
    )
    const third = new FileLedger(path)
    await third.load()
    expect(third.aliveWindowsMs).toBeUndefined()
    await third.close()
    // Nor does a damaged one.
    writeFileSync(join(path, 'ledger.alive'), '{"ledger":')
    const fourth = new FileLedger(path)
    await fourth.load()
    expect(fourth.aliveWindowsMs).toBeUndefined()
    await fourth.close()
  })

  it('has nothing to say in a data directory that holds files but no ledger (a lost one)', async () => {
    const path = dir()
    writeFileSync(join(path, 'something-else'), 'x')
    const ledger = new FileLedger(path)
    expect(await ledger.load()).toBeUndefined()
    expect(ledger.fresh).toBe(false)
    await ledger.close()
  })

  it('refuses a data directory it cannot make or write, with SLUICE_ERR_LEDGER_DIR', async () => {
    const file = join(dir(), 'a-file')
    writeFileSync(file, '')
    await expect(new FileLedger(join(file, 'data')).load()).rejects.toMatchObject({
      code: 'SLUICE_ERR_LEDGER_DIR',
      message: expect.stringContaining('--data-dir none'),
    })
  })

  it('takes its data directory for one coordinator at a time: a live holder is refused, a dead one is taken over', async () => {
    const path = dir()
    // Another process holds the kernel lock (flock), whatever pid it has.
    const holder = spawn('flock', [join(path, 'ledger.lock'), 'sh', '-c', 'echo held; exec cat'], {
      stdio: ['pipe', 'pipe', 'ignore'],
    })
    await once(holder.stdout, 'data')
    await expect(new FileLedger(path).load()).rejects.toMatchObject({
      code: 'SLUICE_ERR_LEDGER_LOCKED',
    })
    holder.stdin.end()
    await once(holder, 'exit')
    // A lock file left by a process that is gone (its content is only a note) is taken over.
    writeFileSync(join(path, 'ledger.lock'), String(process.pid))
    const ledger = new FileLedger(path)
    await ledger.load()
    expect(readFileSync(join(path, 'ledger.lock'), 'utf8')).toContain(`pid ${process.pid}`)
    await expect(
      new FileLedger(path).load(),
      'a second holder in this process',
    ).rejects.toMatchObject({
      code: 'SLUICE_ERR_LEDGER_LOCKED',
    })
    await ledger.close()
    const next = new FileLedger(path)
    await next.load()
    await next.close()
  })

  it('keeps its file bounded: compaction leaves a few lines per live entry', async () => {
    const path = dir()
    const ledger = new FileLedger(path)
    await ledger.load()
    const put: LedgerEntry = {
      clientKey: 'a',
      clientId: 'a',
      tenant: undefined,
      instance: undefined,
      resource: 'api',
      pinned: false,
      commitments: [{ capacity: 1, untilMs: 1, fallback: 1, fallbackUntilMs: 1 }],
    }
    for (let i = 0; i < 2000; i++)
      await ledger.write([
        { put: { ...put, commitments: [{ ...put.commitments[0]!, untilMs: i }] } },
      ])
    await ledger.close()
    expect(readFileSync(ledger.path, 'utf8').split('\n').length).toBeLessThanOrEqual(66)
    expect(statSync(ledger.path).size).toBeLessThan(64 * 1024)
  })

  it('keeps its file bounded when every write renews thousands of entries (hot keys): compacted by bytes', async () => {
    // Each write is one line of every entry (as a round renewing 2,000 hot keys writes): 40
    // writes of 2,000 entries are 40 lines, far below the count of lines that compacts, and
    // ~13 MB uncompacted.
    const path = dir()
    const ledger = new FileLedger(path)
    await ledger.load()
    const entries = 2000
    const put = (i: number, round: number): LedgerEntry => ({
      clientKey: 'a',
      clientId: 'a',
      tenant: undefined,
      instance: undefined,
      resource: `key/h${i}`,
      pinned: false,
      commitments: [
        {
          capacity: 8,
          untilMs: 1764000000000 + round,
          fallback: 8,
          fallbackUntilMs: 1764000005000,
        },
      ],
      writtenMs: 1764000000000 + round,
    })
    let largest = 0
    for (let round = 0; round < 40; round++) {
      await ledger.write(Array.from({ length: entries }, (_, i) => ({ put: put(i, round) })))
      largest = Math.max(largest, statSync(ledger.path).size)
    }
    await ledger.close()
    const live = Array.from({ length: entries }, (_, i) => JSON.stringify({ put: put(i, 39) }))
    const liveBytes = live.join(',').length
    // At most four times the live entries, and the one write that passed it.
    expect(largest).toBeLessThanOrEqual(5 * liveBytes + 4096)
    const back = await new FileLedger(path).load()
    expect(back).toHaveLength(entries)
    expect(byKey(back)[entryKey('a', 'key/h7')]).toEqual(put(7, 39))
  })

  it('drops a torn last write (a crash mid-write, never acknowledged), whatever byte it stops at', async () => {
    const path = dir()
    const ledger = new FileLedger(path)
    await ledger.load()
    const a: LedgerEntry = {
      clientKey: 'a',
      clientId: 'a',
      tenant: undefined,
      instance: 'i-000001',
      resource: 'api',
      pinned: false,
      commitments: [{ capacity: 5, untilMs: 9, fallback: 2, fallbackUntilMs: 10 }],
    }
    await ledger.write([{ put: a }])
    await ledger.close()
    const whole = readFileSync(ledger.path)
    // The next line as it would have been written, cut at every byte but its newline.
    const torn = encodeLine(2, 0, [{ put: { ...a, resource: 'db' } }])
    for (let cut = 0; cut < torn.length - 1; cut += 7) {
      writeFileSync(ledger.path, whole)
      appendFileSync(ledger.path, torn.slice(0, cut))
      const reopened = new FileLedger(path)
      const loaded = await reopened.load()
      await reopened.close()
      expect(loaded).toEqual([a])
    }
  })

  it('refuses a ledger with a bad line before the last, with SLUICE_ERR_LEDGER_CORRUPT', async () => {
    const path = dir()
    const ledger = new FileLedger(path)
    await ledger.load()
    const a: LedgerEntry = {
      clientKey: 'a',
      clientId: 'a',
      tenant: undefined,
      instance: undefined,
      resource: 'api',
      pinned: false,
      commitments: [],
    }
    await ledger.write([{ put: a }])
    await ledger.write([{ put: { ...a, resource: 'db' } }])
    await ledger.close()
    const text = readFileSync(ledger.path, 'utf8')
    const damaged = text.replace('"api"', '"apj"')
    expect(damaged).not.toBe(text)
    writeFileSync(ledger.path, damaged)
    appendFileSync(ledger.path, text.split('\n').slice(0, 1).join('\n') + '\n')
    await expect(new FileLedger(path).load()).rejects.toMatchObject({
      code: 'SLUICE_ERR_LEDGER_CORRUPT',
    })
    truncateSync(ledger.path, 0)
  })
})
