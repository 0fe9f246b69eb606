import { spawn } from 'node:child_process'
import autocannon from 'autocannon'
import { summarise } from './stats.js'

/**
 * Throughput of a fastify hello route with and without `fastifyRateLimit`
 * (a local per-IP token bucket, every request allowed), under autocannon on
 * loopback. The server runs in its own process; runs alternate between the
 * two variants so drift hits both alike.
 */
async function serve(
  variant: 'plain' | 'skip' | 'plugin',
): Promise<{ url: string; stop: () => Promise<void> }> {
  const child = spawn(process.execPath, ['dist/bench/http-server.js', variant], {
    stdio: ['ignore', 'pipe', 'inherit'],
  })
  const port = await new Promise<number>((resolve, reject) => {
    let out = ''
    child.stdout.on('data', (chunk: Buffer) => {
      out += chunk.toString()
      const match = /port (\d+)/.exec(out)
      if (match) resolve(Number(match[1]))
    })
    child.once('exit', (code) => reject(new Error(`server exited with ${code}`)))
  })
  return {
    url: `http://127.0.0.1:${port}/hello`,
    stop: () =>
      new Promise<void>((resolve) => {
        child.once('exit', () => resolve())
        child.kill('SIGTERM')
      }),
  }
}

async function load(url: string, durationSec: number): Promise<number> {
  const result = await autocannon({ url, connections: 50, pipelining: 1, duration: durationSec })
  return result.requests.average
}

export async function benchHttp(runs: number, durationSec: number): Promise<string[]> {
  const samples = { plain: [] as number[], skip: [] as number[], plugin: [] as number[] }
  for (let r = 0; r < runs; r++) {
    for (const variant of ['plain', 'skip', 'plugin'] as const) {
      const server = await serve(variant)
      try {
        await load(server.url, 1) // warm-up
        samples[variant].push(await load(server.url, durationSec))
      } finally {
        await server.stop()
      }
    }
  }
  const plain = summarise(samples.plain)
  const skip = summarise(samples.skip)
  const plugin = summarise(samples.plugin)
  const f = (s: { median: number; min: number; max: number }): string =>
    `${Math.round(s.median).toLocaleString('en-US')} (${Math.round(s.min).toLocaleString('en-US')}–${Math.round(s.max).toLocaleString('en-US')})`
  return [
    `| fastify hello route | ${f(plain)} | — |`,
    `| with \`fastifyRateLimit\`, every request skipped (the hook alone) | ${f(skip)} | ${(((plain.median - skip.median) / plain.median) * 100).toFixed(1)}% |`,
    `| with \`fastifyRateLimit\` (local per-IP token bucket, all allowed, two headers added) | ${f(plugin)} | ${(((plain.median - plugin.median) / plain.median) * 100).toFixed(1)}% |`,
  ]
}
