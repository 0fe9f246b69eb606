import { spawn, spawnSync } from 'node:child_process'
import { existsSync } from 'node:fs'
import { join } from 'node:path'
import { Redis } from 'ioredis'
import { sleep } from './faults/harness.js'

/**
 * A redis-server of the machine's (Debian's), on a unix socket in `dir`, with
 * no persistence: the store a Redis-backed limiter would use next door.
 * Undefined when the machine has none.
 */
export async function startRedis(
  dir: string,
): Promise<{ redis: Redis; stop: () => void } | undefined> {
  const path = spawnSync('which', ['redis-server']).stdout.toString().trim()
  if (path === '') return undefined
  const socket = join(dir, 'redis.sock')
  const server = spawn(
    path,
    ['--port', '0', '--unixsocket', socket, '--save', '', '--appendonly', 'no', '--dir', dir],
    { stdio: 'ignore' },
  )
  try {
    for (let i = 0; i < 250 && !existsSync(socket); i++) await sleep(20)
    const redis = new Redis({ path: socket, maxRetriesPerRequest: 1 })
    await redis.ping()
    return {
      redis,
      stop: () => {
        redis.disconnect()
        server.kill('SIGTERM')
      },
    }
  } catch (error) {
    server.kill('SIGTERM')
    throw error
  }
}
