import {
  mkdtempSync,
  readFileSync,
  readdirSync,
  rmSync,
  truncateSync,
  writeFileSync,
} from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterEach, describe, expect, it } from 'vitest'
import { encodeHeader } from '../../../server/ledger/file-format.js'
import {
  FileLedger,
  restoredUntilMs,
  writtenBeforeLast,
  type LedgerEntry,
} from '../../../server/ledger/index.js'

// What a ledger file damaged by bad luck or an operator reads as: never "nothing outstanding".

const dirs: string[] = []
afterEach(() => {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true })
})

const entry = (resource: string, capacity: number): LedgerEntry => ({
  clientKey: 'c',
  clientId: 'c',
  tenant: undefined,
  instance: undefined,
  resource,
  pinned: false,
  commitments: [{ capacity, untilMs: 10_000, fallback: 0, fallbackUntilMs: 10_000 }],
  writtenMs: 1000,
})

/** A ledger of three writes, closed; its directory and file. */
async function written(): Promise<{ dir: string; path: string; text: string }> {
  const dir = mkdtempSync(join(tmpdir(), 'sluice-damage-'))
  dirs.push(dir)
  const ledger = new FileLedger(dir)
  await ledger.load()
  await ledger.write([{ put: entry('a', 1) }])
  await ledger.write([{ put: entry('b', 2) }])
  await ledger.write([{ put: entry('c', 3) }])
  await ledger.close()
  return { dir, path: ledger.path, text: readFileSync(ledger.path, 'utf8') }
}

async function loadOf(dir: string): Promise<LedgerEntry[] | undefined> {
  const ledger = new FileLedger(dir)
  try {
    return await ledger.load()
  } finally {
    await ledger.close()
  }
}

describe('a damaged ledger file', () => {
  const cuts: [string, (text: string) => string][] = [
    ['truncated to its first line', (t) => t.slice(0, t.indexOf('\n') + 1)],
    ['truncated to its first two lines', (t) => t.split('\n').slice(0, 2).join('\n') + '\n'],
    ['truncated to half', (t) => t.slice(0, Math.floor(t.length / 2))],
    ['emptied', () => ''],
    ['cut inside its header', (t) => t.slice(0, 20)],
  ]
  for (const [what, cut] of cuts)
    it(`is corrupt when ${what}, never empty`, async () => {
      const { dir, path, text } = await written()
      writeFileSync(path, cut(text))
      await expect(loadOf(dir)).rejects.toMatchObject({ code: 'SLUICE_ERR_LEDGER_CORRUPT' })
    })

  it('is corrupt when a complete last line fails its checksum: it was synced, not torn', async () => {
    const { dir, path, text } = await written()
    const damaged = text.slice(0, -5) + (text.at(-5) === 'x' ? 'y' : 'x') + text.slice(-4)
    writeFileSync(path, damaged)
    await expect(loadOf(dir)).rejects.toMatchObject({ code: 'SLUICE_ERR_LEDGER_CORRUPT' })
  })

  it('is corrupt when it is a file of the earlier format (no header)', async () => {
    const { dir, path } = await written()
    writeFileSync(path, '0123456789abcdef []\n')
    await expect(loadOf(dir)).rejects.toMatchObject({ code: 'SLUICE_ERR_LEDGER_CORRUPT' })
  })

  it('is moved aside, and what comes next goes to a new ledger, not after the damage', async () => {
    const { dir, path, text } = await written()
    truncateSync(path, Math.floor(text.length / 2))
    const ledger = new FileLedger(dir)
    await expect(ledger.load()).rejects.toMatchObject({
      code: 'SLUICE_ERR_LEDGER_CORRUPT',
      message: expect.stringContaining('moved aside'),
    })
    const firstId = text.slice(16, 48)
    expect(ledger.id).not.toBe(firstId)
    await ledger.write([{ put: entry('d', 4) }])
    await ledger.close()
    expect(readdirSync(dir).some((f) => f.startsWith('ledger.log.corrupt-'))).toBe(true)
    expect((await loadOf(dir))?.map((e) => e.resource)).toEqual(['d'])
  })

  it('reads a file holding more than its header promises (a power cut between the data and the header)', async () => {
    const { dir, path, text } = await written()
    const id = text.slice(16, 48)
    const lagging = encodeHeader(id, 2) + text.slice(text.indexOf('\n') + 1)
    writeFileSync(path, lagging)
    expect((await loadOf(dir))?.map((e) => e.resource)).toEqual(['a', 'b', 'c'])
    writeFileSync(path, encodeHeader(id, 4) + text.slice(text.indexOf('\n') + 1))
    await expect(loadOf(dir), 'promising more than it holds').rejects.toMatchObject({
      code: 'SLUICE_ERR_LEDGER_CORRUPT',
    })
  })
})

describe('a restored lease', () => {
  it('lives at least its remaining life as written, from the restart, whatever the wall clock says', () => {
    // Written at wall 1000 with 9000 ms left; restarted at mono 50.
    const stepped = (nowWall: number): number => restoredUntilMs(10_000, 1000, nowWall, 50)
    expect(stepped(1000)).toBe(9050)
    // Wall clock 15 s ahead at the restart: the wall alone says the lease has lapsed.
    expect(stepped(16_000)).toBe(9050)
    // Wall clock behind: the wall says longer, and longer is what counts.
    expect(stepped(-5000)).toBe(15_050)
    // A lease that had lapsed when it was written stays lapsed.
    expect(restoredUntilMs(900, 1000, 1000, 50)).toBeLessThan(50)
    // Its writer went on writing 9.5 s after it (on its monotonic clock): it had run out by then.
    expect(restoredUntilMs(10_000, 1000, 16_000, 50, 9500)).toBeLessThan(50)
  })

  it('knows how long each entry’s writer went on writing after it, per epoch', () => {
    const e = (epoch: string, writtenMono: number) => ({ ...entry('a', 1), epoch, writtenMono })
    const entries = [e('x', 100), e('x', 400), e('y', 5), e('y', 50)]
    const before = writtenBeforeLast(entries)
    expect(entries.map(before)).toEqual([300, 0, 45, 0])
    expect(before(entry('b', 1))).toBe(0)
  })
})
