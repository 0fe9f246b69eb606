import { createClient, type SluiceClient } from '../../client/index.js'
import { hostMs } from './host-time.js'

/** What a fault worker logs: JSON lines on stdout, written when `flush` is called. */
export interface WorkerLog {
  readonly out: string[]
  flush(): void
}

/** A fault worker's log and client: quick reconnects, each connect and disconnect logged. */
export function workerClient(
  url: string,
  clientId: string,
): { log: WorkerLog; client: SluiceClient } {
  const out: string[] = []
  const log: WorkerLog = {
    out,
    flush: () => {
      if (out.length > 0) process.stdout.write(`${out.splice(0).join('\n')}\n`)
    },
  }
  const client = createClient({
    url,
    clientId,
    backoffBaseMs: 100,
    backoffCapMs: 1000,
    connectTimeoutMs: 2000,
  })
  client.on('error', () => undefined)
  client.on('connect', () => out.push(JSON.stringify({ t: hostMs(), connected: true })))
  client.on('disconnect', () => out.push(JSON.stringify({ t: hostMs(), connected: false })))
  return { log, client }
}
