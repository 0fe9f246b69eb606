import { execFile } from 'node:child_process'
import { promisify } from 'node:util'
import { describe, expect, it } from 'vitest'
import { assertBuilt } from '../../helpers/replica.js'

// A coordinator restarted (a deploy, a crash) refuses every connection until it listens, and
// its clients wait out their backoff on top: its start is part of every restart's cost. etcd's
// client (its gRPC stack) is loaded only when server.ha asks for it, and fastify's schema
// compilers (ajv, fast-json-stringify: about 80 ms) never: the routes validate with zod.

const script = `
import { createRequire } from 'node:module'
import pino from 'pino'
import { createCoordinator } from './dist/server/index.js'
const server = await createCoordinator({
  config: 'examples/default.yaml', port: 0, dataDir: false, logger: pino({ level: 'silent' }),
})
const loaded = Object.keys(createRequire(import.meta.url).cache)
await server.close()
console.log(JSON.stringify(loaded.filter((path) => /[\\\\/]node_modules[\\\\/]/.test(path))))
`

/** What a coordinator's start loads from node_modules (the built one, in a process of its own). */
async function startLoads(): Promise<string[]> {
  assertBuilt()
  const { stdout } = await promisify(execFile)(
    process.execPath,
    ['--input-type=module', '-e', script],
    { cwd: process.cwd() },
  )
  return JSON.parse(stdout) as string[]
}

describe('a coordinator’s start', () => {
  it('loads no etcd client when no election is configured', async () => {
    const loaded = await startLoads()
    // What it does load from node_modules is seen (fastify's own CommonJS), so the check is live.
    expect(loaded.some((path) => /[\\/]fastify[\\/]/.test(path))).toBe(true)
    expect(loaded.filter((path) => /[\\/](etcd3|@grpc)[\\/]/.test(path))).toEqual([])
  })

  it('loads none of fastify’s schema compilers: the routes validate with zod', async () => {
    const loaded = await startLoads()
    expect(loaded.some((path) => /[\\/]fastify[\\/]/.test(path))).toBe(true)
    // Fastify's error replies need fast-json-stringify's small serializer, not its compiler.
    const compilers =
      /[\\/](ajv|ajv-formats|@fastify[\\/](ajv-compiler|fast-json-stringify-compiler))[\\/]|[\\/]fast-json-stringify[\\/]index\.js$/
    expect(loaded.filter((path) => compilers.test(path))).toEqual([])
  })
})
