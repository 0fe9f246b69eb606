/** What a command reads and writes; the real process streams, or buffers in tests. */
export interface CommandIo {
  readonly stdin: AsyncIterable<string | Buffer> | Iterable<string | Buffer>
  readonly stdout: { write(text: string): unknown }
  readonly stderr: { write(text: string): unknown }
  /** Where `serve` listens for SIGHUP (reload), SIGINT and SIGTERM (stop); default `process`. */
  readonly signals?: Pick<NodeJS.EventEmitter, 'on' | 'off'>
  /** The terminal, when both ends are one (`sluice top` draws on it and reads keys). */
  readonly tty?: {
    readonly input: Pick<NodeJS.ReadStream, 'setRawMode' | 'on' | 'off' | 'pause' | 'resume'>
    readonly output: Pick<NodeJS.WriteStream, 'columns' | 'rows' | 'write' | 'on' | 'off'>
  }
}

/** Exit statuses of the `sluice` command. */
export const exitCodes = Object.freeze({ ok: 0, failure: 1, usage: 2 })

/** Reads all of stdin as UTF-8, refusing more than `maxBytes`. */
export async function readAll(stdin: CommandIo['stdin'], maxBytes: number): Promise<string> {
  const chunks: Buffer[] = []
  let size = 0
  for await (const chunk of stdin) {
    const buffer = typeof chunk === 'string' ? Buffer.from(chunk) : chunk
    size += buffer.length
    if (size > maxBytes) throw new RangeError(`input is larger than ${maxBytes} bytes`)
    chunks.push(buffer)
  }
  return Buffer.concat(chunks).toString('utf8')
}
