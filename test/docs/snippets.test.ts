import { spawn } from 'node:child_process'
import { once } from 'node:events'
import { mkdirSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import ts from 'typescript'
import { parse as parseYaml } from 'yaml'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { commandUsage, runCli } from '../../server/cli/main.js'
import { parseConfigText } from '../../server/config/index.js'
import { createCoordinator, type RunningCoordinator } from '../../server/index.js'
import { parseScenario } from '../../server/sim/index.js'
import { systemClock } from '../../shared/index.js'
import { clientMessage, serverMessage } from '../../shared/protocol/index.js'
import { assertBuilt } from '../helpers/replica.js'
import { waitFor } from '../helpers/wait.js'

// Every code block of README.md and docs/ is checked here, so a snippet that
// stops working fails CI: TypeScript is type-checked against the published
// entry points (sluice/client, sluice/http, …) and run against a real
// coordinator (`ts check` blocks are only type-checked: they need machines a
// test does not have; `ts serves=/path` blocks start a server, which is asked
// for the path and stopped); YAML configs and scenarios are validated by their
// parsers; protocol messages by the protocol schemas; JSON parsed; shell lines
// name real commands, options and npm scripts.

const root = join(import.meta.dirname, '../..')
const documents = [
  'README.md',
  ...readdirSync(join(root, 'docs'))
    .filter((f) => f.endsWith('.md'))
    .map((f) => `docs/${f}`),
]

interface Block {
  readonly file: string
  readonly line: number
  readonly lang: string
  readonly info: string
  readonly code: string
}

function blocks(): Block[] {
  const out: Block[] = []
  for (const file of documents) {
    const lines = readFileSync(join(root, file), 'utf8').split('\n')
    for (let i = 0; i < lines.length; i++) {
      const open = /^```(\w+)\s*(.*)$/.exec(lines[i]!)
      if (open === null) continue
      const start = i
      const body: string[] = []
      while (++i < lines.length && lines[i] !== '```') body.push(lines[i]!)
      out.push({
        file,
        line: start + 1,
        lang: open[1]!,
        info: open[2]!.trim(),
        code: body.join('\n'),
      })
    }
  }
  return out
}

const all = blocks()
const name = (b: Block) => `${b.file}:${b.line}`
const tsBlocks = all.filter((b) => b.lang === 'ts')
const dir = join(root, 'test-results', 'snippets')
const fileOf = (b: Block) => join(dir, `${b.file.replace(/[/.]/g, '_')}_${b.line}`)

/** The resources every snippet may ask for, leased at once (no learning: a fresh test coordinator). */
const config = `
resources:
  - { match: payments-api, kind: rate, capacity: 1000, learningMs: 0, unsafeLearning: true }
  - { match: db-writes, kind: concurrency, capacity: 50, learningMs: 0, unsafeLearning: true }
  # Short leases: a snippet killed while it holds a family's share lets it go within ~1.5 s.
  - { match: 'apikey/*', keyed: true, kind: rate, capacity: 100, leaseTtlMs: 1000, refreshMs: 200, graceMs: 200, safeHoldMs: 200, learningMs: 0, unsafeLearning: true }
  - { match: 'ip/*', keyed: true, kind: rate, capacity: 10, leaseTtlMs: 1000, refreshMs: 200, graceMs: 200, safeHoldMs: 200, learningMs: 0, unsafeLearning: true }
  - { match: emails, kind: quota, capacity: 10000, window: 1d, learningMs: 0, unsafeLearning: true }
  - { match: 'customer/*', keyed: true, kind: quota, capacity: 10000, window: 1d, refreshMs: 200, graceMs: 200, learningMs: 0, unsafeLearning: true }
  - { match: '*', kind: rate, capacity: 100, learningMs: 0, unsafeLearning: true }
`

let coordinator: RunningCoordinator

beforeAll(async () => {
  assertBuilt()
  rmSync(dir, { recursive: true, force: true })
  mkdirSync(dir, { recursive: true })
  const configFile = join(dir, 'sluice.yaml')
  writeFileSync(configFile, config)
  coordinator = await createCoordinator({ config: configFile, host: '127.0.0.1', port: 0 })
})
afterAll(async () => {
  await coordinator?.close()
})

describe('the documentation’s code blocks', () => {
  it('finds the blocks it checks', () => {
    expect(tsBlocks.length).toBeGreaterThanOrEqual(9)
    for (const b of all)
      expect(
        ['ts', 'sh', 'yaml', 'json'],
        `${name(b)}: a block of an unchecked language`,
      ).toContain(b.lang)
  })

  it('type-checks every TypeScript block against the published entry points', () => {
    for (const b of tsBlocks) writeFileSync(`${fileOf(b)}.ts`, `${b.code}\n`)
    const parsed = ts.getParsedCommandLineOfConfigFile(
      join(root, 'tsconfig.json'),
      {},
      {
        ...ts.sys,
        onUnRecoverableConfigFileDiagnostic: (d) => {
          throw new Error(ts.flattenDiagnosticMessageText(d.messageText, '\n'))
        },
      },
    )!
    const program = ts.createProgram(
      tsBlocks.map((b) => `${fileOf(b)}.ts`),
      {
        ...parsed.options,
        noEmit: true,
        declaration: false,
        moduleDetection: ts.ModuleDetectionKind.Force,
      },
    )
    const problems = ts.getPreEmitDiagnostics(program).map((d) => {
      const where =
        d.file === undefined
          ? ''
          : `${d.file.fileName.replace(`${dir}/`, '')}:${d.file.getLineAndCharacterOfPosition(d.start ?? 0).line + 1}: `
      return where + ts.flattenDiagnosticMessageText(d.messageText, '\n')
    })
    expect(problems).toEqual([])
  })

  const runnable = tsBlocks.filter((b) => b.info !== 'check')
  it.each(runnable.map((b) => [name(b), b] as const))(
    'runs %s against a real coordinator',
    async (_name, b) => {
      const port = new URL(coordinator.url).port
      // The docs say 7070 (what `npm start` listens on) and 8080; here the test's coordinator, and any free port.
      const source = b.code
        .replaceAll('127.0.0.1:7070', `127.0.0.1:${port}`)
        .replace(/port: 8080\b/g, 'port: 0')
        .replace(/\.listen\(8080\b/g, '.listen(0')
      const js = ts.transpileModule(source, {
        compilerOptions: { module: ts.ModuleKind.ESNext, target: ts.ScriptTarget.ES2023 },
      }).outputText
      const file = `${fileOf(b)}.mjs`
      writeFileSync(file, js)
      // `serves=/path` (GET it once it listens), with `header=name:value` to send.
      const info = /^serves=(\S+)(?: header=([^:\s]+):(\S+))?$/.exec(b.info)
      const serves = info?.[1]
      const headers: Record<string, string> = info?.[2] === undefined ? {} : { [info[2]]: info[3]! }
      // A preload that says where a server listens, so the test needs no fixed port.
      const child = spawn(process.execPath, ['--import', reporter(), file], {
        cwd: root,
        stdio: ['ignore', 'pipe', 'pipe'],
        env: { ...process.env, SLUICE_LOG_LEVEL: 'silent' },
      })
      let stdout = ''
      let stderr = ''
      child.stdout.on('data', (d: Buffer) => (stdout += d.toString()))
      child.stderr.on('data', (d: Buffer) => (stderr += d.toString()))
      const exited = once(child, 'exit') as Promise<[number | null, string | null]>
      try {
        if (serves !== undefined) {
          const listening = await waitFor(`${name(b)} to listen`, () => {
            if (child.exitCode !== null) throw new Error(`${name(b)} exited: ${stderr}`)
            return /@@listening (\d+)/.exec(stdout)?.[1]
          })
          // A gateway that has just joined a family earns each new key's tokens from its share's
          // arrival (docs/keys.md, "A gateway that joins"): a first request a few ms after
          // ready() may be refused. Five tries, 200 ms apart, then it must have served.
          let res = await fetch(`http://127.0.0.1:${listening}${serves}`, { headers })
          for (let i = 0; i < 4 && res.status === 429; i++) {
            await new Promise<void>((resolve) => systemClock.setTimeout(() => resolve(), 200))
            res = await fetch(`http://127.0.0.1:${listening}${serves}`, { headers })
          }
          expect(res.status, `${name(b)}: GET ${serves}: ${await res.text()}`).toBeLessThan(400)
          expect(
            res.headers.get('ratelimit') ?? res.headers.get('x-ratelimit-remaining'),
          ).not.toBeNull()
          child.kill('SIGTERM')
          await exited
        } else {
          // An upper bound, not a measurement: a snippet that hangs is killed and fails.
          const timer = systemClock.setTimeout(() => child.kill('SIGKILL'), 25_000)
          const [code] = await exited
          timer.cancel()
          expect(code, `${name(b)} failed:\n${stderr}`).toBe(0)
          expect(stderr, name(b)).not.toMatch(/Error|SLUICE_ERR/)
        }
      } finally {
        if (child.exitCode === null) child.kill('SIGKILL')
      }
    },
  )

  it('validates every YAML block: configs by the config loader, the scenario by the simulator', () => {
    for (const b of all.filter((x) => x.lang === 'yaml')) {
      if (b.file === 'docs/simulation.md') {
        expect(() => parseScenario(parseYaml(b.code), name(b)), name(b)).not.toThrow()
        continue
      }
      // A config excerpt without resources is completed with one, as a user would.
      const text = /^resources:/m.test(b.code)
        ? b.code
        : `${b.code}\nresources:\n  - { match: '*', kind: rate, capacity: 1 }\n`
      expect(() => parseConfigText(text, name(b)), name(b)).not.toThrow()
    }
  })

  it('validates every protocol message of docs/protocol.md, and parses every other JSON block', () => {
    for (const b of all.filter((x) => x.lang === 'json')) {
      const value: unknown = JSON.parse(b.code)
      if (b.file !== 'docs/protocol.md') continue
      const asClient = clientMessage.safeParse(value)
      const asServer = serverMessage.safeParse(value)
      expect(asClient.success || asServer.success, `${name(b)}: ${asServer.error?.message}`).toBe(
        true,
      )
    }
  })

  it('names only real commands, options and npm scripts in shell blocks, and shows what allocate prints', async () => {
    const scripts = Object.keys(
      (JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')) as { scripts: object }).scripts,
    )
    for (const b of all.filter((x) => x.lang === 'sh')) {
      const text = b.code.replace(/\\\n\s*/g, ' ')
      for (const line of text.split('\n')) {
        for (const m of line.matchAll(/npm (?:run |start|test)(\S*)/g)) {
          const script = m[0].startsWith('npm run ') ? m[1]! : m[0].slice(4)
          expect(scripts, `${name(b)}: npm ${script}`).toContain(script.replace(/^run /, ''))
        }
        const cli = /(?:^|\|\s*|&&\s*)(?:npx )?sluice (\w+)(.*?)(?:#.*)?$/.exec(line.trim())
        if (cli === null) continue
        const usage = commandUsage[cli[1]!]
        expect(usage, `${name(b)}: sluice ${cli[1]}`).toBeDefined()
        for (const flag of cli[2]!.matchAll(/\s(--?[a-z][\w-]*)/g))
          expect(usage, `${name(b)}: sluice ${cli[1]} ${flag[1]}`).toContain(flag[1])
      }
      const allocate = /echo '(.*)' \|\s*npx sluice allocate\n# (.*)/.exec(
        b.code.replace(/\\\n\s*/g, ''),
      )
      if (allocate !== null) {
        let out = ''
        const code = await runCli(['allocate'], {
          stdin: [allocate[1]!],
          stdout: { write: (t: string) => (out += t) },
          stderr: { write: () => undefined },
        })
        expect(code).toBe(0)
        expect(JSON.parse(out)).toEqual(JSON.parse(allocate[2]!))
      }
    }
  })
})

/** A preload module that prints `@@listening <port>` when a server in the snippet listens. */
function reporter(): string {
  const file = join(dir, 'listen-reporter.mjs')
  writeFileSync(
    file,
    `import net from 'node:net'
const listen = net.Server.prototype.listen
net.Server.prototype.listen = function (...args) {
  this.once('listening', () => {
    const a = this.address()
    if (a && typeof a === 'object') process.stdout.write('\\n@@listening ' + a.port + '\\n')
  })
  return listen.apply(this, args)
}
`,
  )
  return file
}
