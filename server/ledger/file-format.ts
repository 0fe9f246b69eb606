import { createHash } from 'node:crypto'
import { applyChanges, type LedgerChange, type LedgerEntry } from './types.js'

/**
 * The file ledger's format, as pure functions (the I/O is in file.ts).
 *
 * A header of fixed width, then one line per write:
 *
 *     SLUICE-LEDGER 2 <id: 32 hex> <lines: 12 digits> <checksum: 16 hex>\n
 *     <checksum: 16 hex> {"n":1,"w":<wall ms>,"c":[<changes>]}\n
 *     <checksum: 16 hex> {"n":2,...}\n
 *
 * The header is rewritten in place on every write (same width, one sector)
 * with the count of lines the file must hold, before the one fdatasync that
 * makes both durable. So a file cut short anywhere (truncated to its first
 * line, to half, emptied) holds fewer lines than its header promises and is
 * refused as corrupt, never read as "nothing outstanding". A crash may leave
 * a last line torn (no newline): its write never finished, its leases were
 * never sent, and it is dropped. A complete line that fails its checksum is
 * damage, never a torn write.
 */

const magic = 'SLUICE-LEDGER 2 '
/** The header's byte length, newline included. */
export const headerBytes = magic.length + 32 + 1 + 12 + 1 + 16 + 1

export function checksum(text: string): string {
  return createHash('sha256').update(text).digest('hex').slice(0, 16)
}

/** The header for ledger `id` holding `lines` lines after it. */
export function encodeHeader(id: string, lines: number): string {
  const body = `${magic}${id} ${String(lines).padStart(12, '0')}`
  return `${body} ${checksum(body)}\n`
}

/** One line: write number `n`, made at wall time `wallMs`. */
export function encodeLine(n: number, wallMs: number, changes: readonly LedgerChange[]): string {
  const json = JSON.stringify({ n, w: Math.round(wallMs), c: changes })
  return `${checksum(json)} ${json}\n`
}

/** What a file holds, read whole. */
export interface ParsedLedger {
  readonly id: string
  /** Lines read (complete, checked). */
  readonly lines: number
  /** Bytes of the file those lines and the header take (where the next write goes). */
  readonly bytes: number
  readonly entries: Map<string, LedgerEntry>
  /** Bytes of a torn last write dropped (0 without one). */
  readonly tornBytes: number
}

/** Why a file cannot be trusted; `line` is 1-based, the header being line 1. */
export class LedgerDamage extends Error {
  constructor(readonly detail: string) {
    super(detail)
  }
}

/**
 * Reads a ledger file's text whole, or throws `LedgerDamage` saying what is
 * wrong. Never returns "nothing" for a file that holds something damaged.
 */
export function parseLedger(text: string): ParsedLedger {
  if (text.length === 0) throw new LedgerDamage('the file is empty (no header)')
  const headerEnd = text.indexOf('\n')
  if (headerEnd + 1 !== headerBytes || !text.startsWith(magic))
    throw new LedgerDamage(
      text.startsWith(magic)
        ? 'the header is cut short'
        : 'no Sluice ledger header (a file of an earlier version, or not a ledger)',
    )
  const headerBody = text.slice(0, headerBytes - 18)
  if (checksum(headerBody) !== text.slice(headerBytes - 17, headerBytes - 1))
    throw new LedgerDamage('the header fails its checksum')
  // A copy, not a slice: V8 makes a slice of 13 characters or more point into the whole text,
  // and a ledger keeps its id (and a regexp its last subject) for as long as it runs: the file
  // as it was at load (megabytes, with a family's hot keys) would stay in memory with it.
  const id = Buffer.from(text.slice(magic.length, magic.length + 32), 'latin1').toString('latin1')
  const promised = Number(text.slice(magic.length + 33, magic.length + 45))
  if (!/^[0-9a-f]{32}$/.test(id) || !Number.isInteger(promised))
    throw new LedgerDamage('the header is malformed')
  const entries = new Map<string, LedgerEntry>()
  let at = headerBytes
  let lines = 0
  for (;;) {
    const end = text.indexOf('\n', at)
    if (end < 0) break
    const raw = text.slice(at, end)
    const lineNo = lines + 2
    const json = raw.slice(17)
    if (raw.charAt(16) !== ' ' || checksum(json) !== raw.slice(0, 16))
      throw new LedgerDamage(`line ${lineNo} fails its checksum`)
    let parsed: { n?: unknown; c?: unknown }
    try {
      parsed = JSON.parse(json) as { n?: unknown; c?: unknown }
    } catch (error) {
      throw new LedgerDamage(`line ${lineNo}: ${(error as Error).message}`)
    }
    if (parsed.n !== lines + 1 || !Array.isArray(parsed.c))
      throw new LedgerDamage(`line ${lineNo} is out of order (write ${String(parsed.n)})`)
    applyChanges(entries, parsed.c as LedgerChange[])
    lines++
    at = end + 1
  }
  if (lines < promised)
    throw new LedgerDamage(
      `the header promises ${promised} lines, the file holds ${lines}: it was cut short`,
    )
  return { id, lines, bytes: at, entries, tornBytes: text.length - at }
}
